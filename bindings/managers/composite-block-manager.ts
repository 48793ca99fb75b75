// CompositeBlockManager (docs/composite.md): the KV manager of a hybrid
// attention model. It owns one sub-manager per kind of attention layer --
// full (or compressed: block size base * ratio) and sliding window -- each a
// pool of its own, and gives a sequence one block table per sub-manager.
//
// Growth is all-or-nothing, as in the reference's current code
// (docs/composite.md, growth is all or nothing): every sub-manager's missing
// blocks are checked and taken in one round, and only after the round
// commits are the window blocks that slid out given back. Sub-managers never
// cache, so "enough free ids" is exact and a failed round changes nothing.

import { loadCore } from '../core/plain-core.js';
import { checkInt, checkKeys, checkObject, describe } from '../validate.js';
import type { BlockManagerStats } from './block-manager.js';
import { BlockManagerImpl } from './block-manager-impl.js';
import { CompositeBlockTables, RELEASED } from './composite-block-tables.js';
import {
  DEFAULT_MAX_SEQS_PER_BATCH,
  DEFAULT_MAX_TOKENS_PER_BATCH,
  SlidingWindowBlockManager,
  slidOutBlocks,
  swaPoolBlocks,
  windowBlocksPerSeq,
} from './sliding-window-block-manager.js';

/** Spare tables a manager keeps at most (a replay needs one per running sequence). */
const MAX_SPARE_TABLES = 256;

/** The attention kind a sub-manager serves. */
export type SubManagerKind = 'full' | 'sliding-window';

/** A sub-manager type as the reference spells it (0 = full, 1 = sliding window) or by name. */
export type ManagerType = 0 | 1 | SubManagerKind;

export interface CompositeBlockManagerOptions {
  /** Base tokens per block B (>= 1). */
  blockSize: number;
  /** Base physical blocks N, padding included (>= 2). */
  numBlocks: number;
  /** One entry per sub-manager: 0 / 'full' or 1 / 'sliding-window'. */
  managerTypes: readonly ManagerType[];
  /**
   * One ratio per sub-manager (default all 1). A full sub-manager has blocks
   * of `B * ratio` tokens and `floor(N / ratio)` blocks; a sliding-window one
   * has blocks of `B * max(ratio, 1)` tokens (the reference writes 0 there).
   */
  compressRatios?: readonly number[];
  /** Attention window W in tokens; required when a sub-manager is a sliding window. */
  slidingWindowSize?: number;
  /** Blocks one sequence keeps in a window (default `(W - 1) / B + 1`). */
  swaBlocksPerSeq?: number;
  /** Sizing of the window pools (default 256). */
  maxSeqsPerBatch?: number;
  /** Sizing of the window pools (default 20480). */
  maxTokensPerBatch?: number;
  /** Physical blocks of each sub-manager, padding included, overriding the rules above. */
  subManagerBlocks?: readonly number[];
}

export const COMPOSITE_OPTION_KEYS = [
  'managerTypes',
  'compressRatios',
  'slidingWindowSize',
  'swaBlocksPerSeq',
  'maxSeqsPerBatch',
  'maxTokensPerBatch',
  'subManagerBlocks',
] as const;

/** One sub-manager's layout. */
export interface SubManagerSpec {
  kind: SubManagerKind;
  compressRatio: number;
  blockSize: number;
  numBlocks: number;
}

/** Counters of one sub-manager. */
export interface SubManagerStats extends BlockManagerStats {
  kind: SubManagerKind;
  blockSize: number;
  compressRatio: number;
  /** Counts for admission and capacity (every full sub-manager; never a window). */
  admission: boolean;
  /** The most ids held at once, measured right after each committed round (before window release). */
  peakUsedBlocks: number;
  /** Ids given back because they slid out of the window. */
  blocksReleasedOutOfWindow: number;
  /** Allocation rounds that failed because this sub-manager was short. */
  roundsShort: number;
}

function arrayOf(name: string, v: unknown, length?: number): readonly unknown[] {
  if (!Array.isArray(v)) throw new TypeError(`${name} must be an array, got ${describe(v)}`);
  if (length !== undefined && v.length !== length) {
    throw new RangeError(`${name} must have ${length} entries (one per sub-manager), got ${v.length}`);
  }
  return v;
}

/**
 * Validates the composite options (`name` prefixes the messages) and returns
 * the sub-manager layouts, the window size and the capacity sub-manager.
 * Only the composite keys and `blockSize`/`numBlocks` are read.
 */
export function parseCompositeLayout(o: CompositeBlockManagerOptions, name = 'options') {
  const B = checkInt(`${name}.blockSize`, o.blockSize, 1);
  const N = checkInt(`${name}.numBlocks`, o.numBlocks, 2);
  const types = arrayOf(`${name}.managerTypes`, o.managerTypes);
  if (types.length === 0) throw new RangeError(`${name}.managerTypes must name at least one sub-manager, got an empty array`);
  const kinds: SubManagerKind[] = types.map((t, i) => {
    if (t === 0 || t === 'full') return 'full';
    if (t === 1 || t === 'sliding-window') return 'sliding-window';
    throw new RangeError(`${name}.managerTypes[${i}] must be 0, 1, "full" or "sliding-window", got ${describe(t)}`);
  });
  const ratios =
    o.compressRatios === undefined
      ? kinds.map(() => 1)
      : arrayOf(`${name}.compressRatios`, o.compressRatios, kinds.length).map((r, i) =>
          checkInt(`${name}.compressRatios[${i}]`, r, kinds[i] === 'full' ? 1 : 0),
        );
  const hasWindow = kinds.includes('sliding-window');
  let W = 0;
  if (o.slidingWindowSize !== undefined) W = checkInt(`${name}.slidingWindowSize`, o.slidingWindowSize, 1);
  else if (hasWindow) throw new TypeError(`${name}.slidingWindowSize is required with a sliding-window sub-manager, got undefined`);
  if (!hasWindow) {
    for (const k of ['slidingWindowSize', 'swaBlocksPerSeq', 'maxSeqsPerBatch', 'maxTokensPerBatch'] as const) {
      if (o[k] !== undefined) throw new RangeError(`${name}.${k} does nothing without a sliding-window sub-manager in ${name}.managerTypes`);
    }
  }
  const perSeq = o.swaBlocksPerSeq === undefined ? undefined : checkInt(`${name}.swaBlocksPerSeq`, o.swaBlocksPerSeq, 1);
  const maxSeqs = checkInt(`${name}.maxSeqsPerBatch`, o.maxSeqsPerBatch ?? DEFAULT_MAX_SEQS_PER_BATCH, 0);
  const maxTokens = checkInt(`${name}.maxTokensPerBatch`, o.maxTokensPerBatch ?? DEFAULT_MAX_TOKENS_PER_BATCH, 0);
  const override =
    o.subManagerBlocks === undefined
      ? undefined
      : arrayOf(`${name}.subManagerBlocks`, o.subManagerBlocks, kinds.length).map((n, i) =>
          checkInt(`${name}.subManagerBlocks[${i}]`, n, 2),
        );
  if (override) {
    for (const k of ['swaBlocksPerSeq', 'maxSeqsPerBatch', 'maxTokensPerBatch'] as const) {
      if (o[k] !== undefined) throw new RangeError(`${name}.${k} does nothing with ${name}.subManagerBlocks, which sets every sub-manager's size`);
    }
  }
  const specs: SubManagerSpec[] = kinds.map((kind, i) => {
    const ratio = ratios[i]!;
    const blockSize = checkInt(`${name}.blockSize * compressRatios[${i}]`, B * Math.max(ratio, 1), 1);
    let numBlocks: number;
    if (override) numBlocks = override[i]!;
    else if (kind === 'full') {
      // The reference builds a sub-manager that holds only its padding
      // block (every allocation that needs it fails); none at all it cannot.
      numBlocks = Math.floor(N / ratio);
      if (numBlocks < 1) {
        throw new RangeError(`${name}.numBlocks / compressRatios[${i}] = ${N} / ${ratio} leaves sub-manager ${i} not even its padding block`);
      }
    } else {
      numBlocks = swaPoolBlocks({
        blockSize,
        slidingWindowSize: W,
        swaBlocksPerSeq: perSeq ?? windowBlocksPerSeq(W, blockSize),
        maxSeqsPerBatch: maxSeqs,
        maxTokensPerBatch: maxTokens,
      });
      checkInt(`the window pool size of sub-manager ${i}`, numBlocks, 2);
    }
    return { kind, compressRatio: ratio, blockSize, numBlocks };
  });
  // As in the reference's current code (docs/composite.md, figures): capacity
  // comes from the admission (non-window) sub-manager with the smallest
  // blocks, the lowest index on ties; a window-only layout uses sub-manager 0.
  let capacityIndex = -1;
  specs.forEach((s, i) => {
    if (s.kind === 'full' && (capacityIndex < 0 || s.blockSize < specs[capacityIndex]!.blockSize)) capacityIndex = i;
  });
  if (capacityIndex < 0) capacityIndex = 0;
  return { specs, slidingWindowSize: W, capacityIndex };
}

/** @internal Makes a composite's sub-manager of `spec` (a window pool gets the window size). */
export type SubManagerFactory = (spec: SubManagerSpec, slidingWindowSize: number) => BlockManagerImpl;

/** The plain sub-managers: a window pool, or a prefix-cache-off manager that may hold only its padding block. */
const plainSubManager: SubManagerFactory = (s, W) =>
  s.kind === 'sliding-window'
    ? new SlidingWindowBlockManager({ numBlocks: s.numBlocks, blockSize: s.blockSize, slidingWindowSize: W })
    : new BlockManagerImpl({ numBlocks: s.numBlocks, blockSize: s.blockSize, enablePrefixCache: false }, { minBlocks: 1 });

export class CompositeBlockManager {
  /** Base tokens per block. */
  readonly blockSize: number;
  /** Base physical blocks. */
  readonly numBlocks: number;
  /** Layout of each sub-manager. */
  readonly specs: readonly SubManagerSpec[];
  /** The sub-managers: `SlidingWindowBlockManager` for windows, prefix-cache-off `BlockManagerImpl` otherwise. */
  readonly subManagers: readonly BlockManagerImpl[];
  /** Attention window W in tokens (0 without a window sub-manager). */
  readonly slidingWindowSize: number;
  /** The sub-manager capacity figures come from (the finest admission one). */
  readonly capacityIndex: number;
  private readonly sizes: Int32Array;
  /** Empty tables of sequences gone for good (recycleTables), handed out again by newTables. */
  private readonly spareTables: CompositeBlockTables[] = [];
  private readonly windowed: Uint8Array;
  private readonly need: Int32Array;
  private readonly freeBefore: Int32Array;
  private readonly peaks: number[];
  private readonly releasedOut: number[];
  private readonly short: number[];
  private scratch = new Int32Array(16);
  private disposed = false;

  constructor(options: CompositeBlockManagerOptions, /** @internal */ makeSub: SubManagerFactory = plainSubManager) {
    checkObject('options', options);
    checkKeys('options', options, ['blockSize', 'numBlocks', ...COMPOSITE_OPTION_KEYS]);
    const layout = parseCompositeLayout(options);
    this.blockSize = options.blockSize;
    this.numBlocks = options.numBlocks;
    this.specs = layout.specs;
    this.slidingWindowSize = layout.slidingWindowSize;
    this.capacityIndex = layout.capacityIndex;
    const subs: BlockManagerImpl[] = [];
    try {
      for (const s of layout.specs) subs.push(makeSub(s, layout.slidingWindowSize));
    } catch (e) {
      for (const m of subs) m.dispose();
      throw e;
    }
    this.subManagers = subs;
    const k = subs.length;
    this.sizes = Int32Array.from(layout.specs, (s) => s.blockSize);
    this.windowed = Uint8Array.from(layout.specs, (s) => (s.kind === 'sliding-window' ? 1 : 0));
    this.need = new Int32Array(k);
    this.freeBefore = new Int32Array(k);
    this.peaks = new Array<number>(k).fill(0);
    this.releasedOut = new Array<number>(k).fill(0);
    this.short = new Array<number>(k).fill(0);
  }

  /** Loads the Wasm core if needed, then creates the manager. */
  static async create(options: CompositeBlockManagerOptions): Promise<CompositeBlockManager> {
    checkObject('options', options);
    parseCompositeLayout(options);
    await loadCore();
    return new CompositeBlockManager(options);
  }

  /** The sub-manager capacity figures come from. */
  get capacityManager(): BlockManagerImpl {
    this.live();
    return this.subManagers[this.capacityIndex]!;
  }

  /** Empty block tables for one sequence, one per sub-manager. */
  newTables(): CompositeBlockTables {
    this.live();
    return this.spareTables.pop() ?? new CompositeBlockTables(this, this.specs.map((s) => s.blockSize));
  }

  /**
   * @internal Takes back the tables of a sequence that is gone for good,
   * released (a replay's finished sequence): newTables hands them out again,
   * grown already, where a new sequence's tables grew from 8 entries by
   * doubling (a tenth of a sliding-window replay's loop).
   */
  recycleTables(t: CompositeBlockTables): void {
    if (t._owner !== this || !t.empty) throw new Error('kvpool: internal error: tables recycled into another manager, or still holding blocks');
    t.clear();
    if (this.spareTables.length < MAX_SPARE_TABLES) this.spareTables.push(t);
  }

  /** @internal Throws once the manager is disposed: every public call starts here (or in `own`). */
  live(): void {
    if (this.disposed) throw new Error('kvpool: this CompositeBlockManager was disposed; it cannot be used any more');
  }

  /** True once `dispose()` ran. */
  get isDisposed(): boolean {
    return this.disposed;
  }

  private own(tables: unknown, name = 'tables'): CompositeBlockTables {
    this.live();
    if (!(tables instanceof CompositeBlockTables)) throw new TypeError(`${name} must be a CompositeBlockTables, got ${describe(tables)}`);
    if (tables._owner !== this) throw new Error(`${name} were made by another composite manager`);
    return tables;
  }

  /**
   * Grows every table to cover `numTokens` tokens, all or nothing, then gives
   * back the window blocks that slid out at `kvCachedTokens` (docs/composite.md,
   * the window rule). Returns false, changing nothing, when some sub-manager
   * is short.
   */
  allocate(tables: CompositeBlockTables, numTokens: number, kvCachedTokens = 0): boolean {
    this.own(tables);
    checkInt('numTokens', numTokens);
    // Computed tokens are tokens of the sequence: more would slide window blocks out that the step still needs.
    checkInt('kvCachedTokens', kvCachedTokens, 0, numTokens);
    return this.allocateFor(tables, numTokens, kvCachedTokens);
  }

  /** Gives back the window blocks of `tables` that slid out at `kvCachedTokens`; returns how many. */
  releaseOutOfWindow(tables: CompositeBlockTables, kvCachedTokens: number): number {
    this.own(tables);
    checkInt('kvCachedTokens', kvCachedTokens);
    return this.releaseWindowsFor(tables, kvCachedTokens);
  }

  /** Lets go of every id the tables hold (ascending, sub-manager by sub-manager) and empties them. */
  deallocate(tables: CompositeBlockTables): void {
    this.deallocateFor(this.own(tables));
  }

  /** Copies of `tables` sharing every id (one reference added to each), e.g. for a beam fork. */
  fork(tables: CompositeBlockTables): CompositeBlockTables {
    return this.forkFor(this.own(tables));
  }

  // ---- hot paths (arguments validated by the caller) ----

  /** @internal */
  allocateFor(t: CompositeBlockTables, numTokens: number, kvCached: number): boolean {
    const subs = this.subManagers;
    const k = subs.length;
    const need = this.need;
    let ok = true;
    for (let i = 0; i < k; i++) {
      const want = Math.ceil(numTokens / this.sizes[i]!) - t._lengths[i]!;
      need[i] = want > 0 ? want : 0;
      if (want <= 0) continue;
      const free = subs[i]!.numFreeBlocks();
      this.freeBefore[i] = free;
      if (want > free) {
        this.short[i]!++;
        ok = false;
      }
    }
    if (!ok) return false;
    // Stage: each sub-manager's new ids go past its table's end ...
    for (let i = 0; i < k; i++) {
      const n = need[i]!;
      if (n === 0) continue;
      t.reserve(i, n);
      if (!subs[i]!.allocateInto(n, t._tables[i]!, t._lengths[i]!)) {
        this.unstage(t, i);
        throw new Error(`kvpool: internal error: sub-manager ${i} was short after its free count said otherwise`);
      }
    }
    // ... and commit by moving the ends. Without a prefix cache every id off the free stack is used.
    for (let i = 0; i < k; i++) {
      const n = need[i]!;
      if (n === 0) continue;
      t._lengths[i]! += n;
      const used = this.specs[i]!.numBlocks - 1 - (this.freeBefore[i]! - n);
      if (used > this.peaks[i]!) this.peaks[i] = used;
    }
    this.releaseWindowsFor(t, kvCached);
    return true;
  }

  /**
   * @internal Decode steps `t` can take from `numTokens` tokens that change
   * nothing: step j grows it to numTokens + j with numTokens + j - 1 tokens
   * computed, and changes nothing while every table holds the tokens and
   * no window block slides out (what allocateFor would then do).
   */
  decodeRoomFor(t: CompositeBlockTables, numTokens: number): number {
    let room = Infinity;
    for (let i = 0; i < this.subManagers.length; i++) {
      const size = this.sizes[i]!;
      const len = t._lengths[i]!;
      room = Math.min(room, len * size - numTokens);
      const released = t._released[i]!;
      // outOfWindowBlocks first exceeds `released` at (released + 1) * size + W - 1 computed tokens.
      if (this.windowed[i] !== 0 && released < len) room = Math.min(room, (released + 1) * size + Math.max(this.slidingWindowSize, 1) - 1 - numTokens);
    }
    return room > 0 ? room : 0;
  }

  /** Undoes the staged ids of sub-managers [0, upto), restoring each free stack's order. */
  private unstage(t: CompositeBlockTables, upto: number): void {
    for (let i = upto - 1; i >= 0; i--) {
      const n = this.need[i]!;
      if (n === 0) continue;
      if (this.scratch.length < n) this.scratch = new Int32Array(n);
      const src = t._tables[i]!;
      const at = t._lengths[i]!;
      for (let j = 0; j < n; j++) this.scratch[j] = src[at + n - 1 - j]!;
      this.subManagers[i]!.releaseFrom(this.scratch, 0, n);
    }
  }

  /** @internal */
  releaseWindowsFor(t: CompositeBlockTables, kvCached: number): number {
    let total = 0;
    for (let i = 0; i < this.subManagers.length; i++) {
      if (this.windowed[i] === 0) continue;
      const first = t._released[i]!;
      const upto = slidOutBlocks(kvCached, this.slidingWindowSize, this.sizes[i]!, t._lengths[i]!);
      if (upto <= first) continue;
      const code = this.subManagers[i]!.releaseFrom(t._tables[i]!, first, upto);
      if (code < 0) throw new Error(`kvpool: internal error releasing window blocks (core code ${code})`);
      t._tables[i]!.fill(RELEASED, first, upto);
      t._released[i] = upto;
      this.releasedOut[i]! += upto - first;
      total += upto - first;
    }
    return total;
  }

  /** @internal */
  deallocateFor(t: CompositeBlockTables): void {
    for (let i = 0; i < this.subManagers.length; i++) {
      const code = this.subManagers[i]!.releaseFrom(t._tables[i]!, t._released[i]!, t._lengths[i]!);
      if (code < 0) throw new Error(`kvpool: internal error releasing a composite table (core code ${code})`);
    }
    t.clear();
  }

  /** @internal */
  forkFor(t: CompositeBlockTables): CompositeBlockTables {
    const c = t.clone();
    for (let i = 0; i < this.subManagers.length; i++) {
      const code = this.subManagers[i]!.retainFrom(c._tables[i]!, c._released[i]!, c._lengths[i]!);
      if (code < 0) throw new Error(`kvpool: internal error sharing a composite table (core code ${code})`);
    }
    return c;
  }

  // ---- figures (capacity from the finest admission sub-manager: docs/composite.md, figures) ----

  numFreeBlocks(): number {
    return this.capacityManager.numFreeBlocks();
  }

  numUsedBlocks(): number {
    return this.capacityManager.numUsedBlocks();
  }

  numTotalBlocks(): number {
    return this.capacityManager.numTotalBlocks();
  }

  /** Always 0: a composite does no prefix caching. */
  numBlocksInPrefixCache(): number {
    this.live();
    return 0;
  }

  kvCacheUtilization(): number {
    return this.capacityManager.kvCacheUtilization();
  }

  /** The capacity sub-manager's counters. */
  stats(): BlockManagerStats {
    return this.capacityManager.stats();
  }

  /** Every sub-manager's counters, in index order. */
  subManagerStats(): SubManagerStats[] {
    this.live();
    return this.subManagers.map((m, i) => ({
      ...m.stats(),
      kind: this.specs[i]!.kind,
      blockSize: this.specs[i]!.blockSize,
      compressRatio: this.specs[i]!.compressRatio,
      admission: this.specs[i]!.kind === 'full',
      peakUsedBlocks: this.peaks[i]!,
      blocksReleasedOutOfWindow: this.releasedOut[i]!,
      roundsShort: this.short[i]!,
    }));
  }

  /** Audits every sub-manager's own state. */
  check(): void {
    this.live();
    this.subManagers.forEach((m, i) => {
      try {
        m.check();
      } catch (e) {
        throw new Error(`sub-manager ${i}: ${(e as Error).message}`);
      }
    });
  }

  /**
   * Audits `tables` (all that hold ids of this manager) against the
   * sub-managers: placeholders only lead window tables, every other entry is
   * a valid id, and each id's holders equal the times the tables hold it.
   * Returns the holder count per id of each sub-manager.
   */
  checkHolders(tables: Iterable<CompositeBlockTables>, /** @internal other holders of one sub-manager's ids */ extra?: { index: number; counts: Int32Array }): Int32Array[] {
    this.live();
    if (tables == null || typeof (tables as Partial<Iterable<unknown>>)[Symbol.iterator] !== 'function') {
      throw new TypeError(`tables must be an iterable of every CompositeBlockTables holding ids of this manager (an array), got ${describe(tables)}`);
    }
    const counts = this.subManagers.map((m) => new Int32Array(m.numBlocks));
    if (extra) counts[extra.index]!.set(extra.counts);
    for (const t of tables) {
      this.own(t);
      for (let i = 0; i < this.subManagers.length; i++) {
        const len = t._lengths[i]!;
        const rel = t._released[i]!;
        const tab = t._tables[i]!;
        const n = this.subManagers[i]!.numBlocks;
        if (rel > len || (rel > 0 && this.windowed[i] === 0)) throw new Error(`kvpool: composite table ${i} has ${rel} released of ${len} blocks`);
        for (let j = 0; j < rel; j++) if (tab[j] !== RELEASED) throw new Error(`kvpool: composite table ${i} position ${j} should be -1, got ${tab[j]}`);
        for (let j = rel; j < len; j++) {
          const id = tab[j]!;
          if (!(id >= 1 && id < n)) throw new Error(`kvpool: composite table ${i} position ${j} holds ${id}, not an id of sub-manager ${i}`);
          counts[i]![id]!++;
        }
      }
    }
    this.subManagers.forEach((m, i) => {
      const actual = m.holderCounts();
      for (let id = 1; id < actual.length; id++) {
        if (actual[id] !== counts[i]![id]) {
          throw new Error(`kvpool: sub-manager ${i} block ${id} has ${actual[id]} holders but tables hold it ${counts[i]![id]} times`);
        }
      }
    });
    return counts;
  }

  /** Gives every sub-manager's memory back to the core. The manager is unusable afterwards: every call throws. */
  dispose(): void {
    this.disposed = true;
    for (const m of this.subManagers) m.dispose();
  }
}
