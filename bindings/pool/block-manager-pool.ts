// BlockManagerPool (seed sections 5 and 8): the KVCacheManager that places
// sequences on dp ranks, gives each a single id, reuses prefix-cache blocks
// and grows, caches and releases their block tables.

import { loadCore } from '../core/instance.js';
import type { BlockManagerStats } from '../managers/block-manager.js';
import { BlockManagerImpl } from '../managers/block-manager-impl.js';
import { ConcurrentBlockManagerImpl } from '../managers/concurrent-block-manager-impl.js';
import type { CoreManager } from '../managers/core-manager.js';
import { SingleBlockManager } from '../managers/single-block-manager.js';
import { checkBool, checkInt, checkKeys, checkObject, checkSeed, describe } from '../validate.js';
import type { BlockTransferInfo, KVCacheManager } from './kv-cache-manager.js';
import { Sequence, type SequenceOwner } from './sequence.js';

export interface BlockManagerPoolOptions {
  /** Physical KV blocks per dp rank, padding id 0 included (>= 2). */
  numBlocks: number;
  /** Tokens per block (>= 1). */
  blockSize: number;
  /** Data-parallel ranks, one manager each (default 1). */
  dpSize?: number;
  /** Reuse full blocks through the prefix cache (default true). */
  enablePrefixCache?: boolean;
  /**
   * Single ids per rank, padding included (default 202: the reference's
   * max_concurrent_requests of 200, plus 2).
   */
  singleBlockCapacity?: number;
  /** XXH3-128 seed of the block hash chain (default 1024). */
  seed?: number | bigint;
  /**
   * Disaggregated prefill/decode (default false): a transfer thread touches
   * the managers too, so each rank gets a ConcurrentBlockManagerImpl (seed 5.1).
   */
  enableDisaggPd?: boolean;
  /** A KV-cache store shares the managers (default false): as enableDisaggPd. */
  enableKvcacheStore?: boolean;
}

const KEYS = [
  'numBlocks', 'blockSize', 'dpSize', 'enablePrefixCache', 'singleBlockCapacity', 'seed', 'enableDisaggPd', 'enableKvcacheStore',
] as const;

export interface PoolRankStats extends BlockManagerStats {
  /** Single ids free / held on this rank. */
  singleBlocksFree: number;
  singleBlocksUsed: number;
}

export function parsePoolOptions(o: BlockManagerPoolOptions, extraKeys: readonly string[] = []) {
  checkObject('options', o);
  checkKeys('options', o, [...KEYS, ...extraKeys]);
  return {
    numBlocks: checkInt('options.numBlocks', o.numBlocks, 2),
    blockSize: checkInt('options.blockSize', o.blockSize, 1),
    dpSize: checkInt('options.dpSize', o.dpSize ?? 1, 1, 4096),
    enablePrefixCache: checkBool('options.enablePrefixCache', o.enablePrefixCache ?? true),
    singleBlockCapacity: checkInt('options.singleBlockCapacity', o.singleBlockCapacity ?? 202, 2),
    seed: o.seed ?? 1024,
    enableDisaggPd: checkBool('options.enableDisaggPd', o.enableDisaggPd ?? false),
    enableKvcacheStore: checkBool('options.enableKvcacheStore', o.enableKvcacheStore ?? false),
  };
}

export class BlockManagerPool implements KVCacheManager, SequenceOwner {
  readonly blockSize: number;
  readonly numBlocks: number;
  readonly dpSize: number;
  readonly enablePrefixCache: boolean;
  /** @internal one KV block manager per dp rank */
  readonly managers: BlockManagerImpl[] = [];
  /** @internal one single-id manager per dp rank */
  readonly singles: SingleBlockManager[] = [];
  /** Sequences holding anything from this pool (for audits). */
  protected readonly live = new Set<Sequence>();
  private readonly swaps: BlockTransferInfo[][] = [];

  constructor(options: BlockManagerPoolOptions) {
    const o = parsePoolOptions(options);
    checkSeed('options.seed', o.seed);
    this.blockSize = o.blockSize;
    this.numBlocks = o.numBlocks;
    this.dpSize = o.dpSize;
    this.enablePrefixCache = o.enablePrefixCache;
    // Seed 5.1: managers other threads touch take a lock (shared-memory core).
    const Impl = o.enableDisaggPd || o.enableKvcacheStore ? ConcurrentBlockManagerImpl : BlockManagerImpl;
    try {
      for (let r = 0; r < o.dpSize; r++) {
        this.managers.push(
          new Impl({ numBlocks: o.numBlocks, blockSize: o.blockSize, enablePrefixCache: o.enablePrefixCache, seed: o.seed }),
        );
        this.singles.push(new SingleBlockManager({ numBlocks: o.singleBlockCapacity }));
        this.swaps.push([]);
      }
    } catch (e) {
      this.dispose();
      throw e;
    }
  }

  /** Loads the Wasm core if needed, then creates the pool. */
  static async create(options: BlockManagerPoolOptions): Promise<BlockManagerPool> {
    const o = parsePoolOptions(options);
    await loadCore();
    if (o.enableDisaggPd || o.enableKvcacheStore) await ConcurrentBlockManagerImpl.ready();
    return new BlockManagerPool(options);
  }

  // ---- placement ----

  /** Validates that `seq` may be used with this pool. */
  protected own(seq: unknown, name = 'sequence'): Sequence {
    if (!(seq instanceof Sequence)) throw new TypeError(`${name} must be a Sequence, got ${describe(seq)}`);
    if (seq._owner !== null && seq._owner !== this) {
      throw new Error(`${name} belongs to another pool; a sequence is used with one pool only`);
    }
    return seq;
  }

  /** The rank a new sequence goes to: most free blocks, lowest rank on ties. */
  protected chooseRank(): number {
    let best = 0;
    let bestFree = this.managers[0]!.numFreeBlocks();
    for (let r = 1; r < this.dpSize; r++) {
      const f = this.managers[r]!.numFreeBlocks();
      if (f > bestFree) {
        best = r;
        bestFree = f;
      }
    }
    return best;
  }

  /** A sequence keeps its rank; a new one is placed (for good, even if the allocation then fails). */
  protected place(seq: Sequence): number {
    if (seq._dpRank < 0) {
      seq._dpRank = this.chooseRank();
      seq._owner = this;
    }
    return seq._dpRank;
  }

  // ---- allocation ----

  allocate(sequence: Sequence, numTokens?: number): boolean;
  allocate(sequences: readonly Sequence[]): boolean;
  allocate(arg: Sequence | readonly Sequence[], numTokens?: number): boolean {
    if (Array.isArray(arg)) {
      if (numTokens !== undefined) throw new TypeError('numTokens cannot be given with a list of sequences');
      arg.forEach((s, i) => this.own(s, `sequences[${i}]`));
      for (const s of arg as readonly Sequence[]) if (!this.allocateOne(s, s._numTokens)) return false;
      return true;
    }
    const seq = this.own(arg);
    const n = numTokens === undefined ? seq._numTokens : checkInt('numTokens', numTokens);
    return this.allocateOne(seq, n);
  }

  /** Seed 5.2: rank, single id, prefix match when empty, then the missing blocks. */
  protected allocateOne(seq: Sequence, numTokens: number): boolean {
    const r = this.place(seq);
    const startedEmpty = seq._numBlocks === 0;
    const newSingle = seq._single < 0;
    if (newSingle && !this.acquireSingle(seq, r)) return false;
    if (startedEmpty && this.enablePrefixCache) this.attachShared(seq, r);
    const need = Math.ceil(numTokens / this.blockSize);
    const held = seq._numBlocks;
    if (need <= held) {
      if (seq._needSwap && !this.swapLastBlock(seq, r)) {
        if (newSingle) this.releaseSingle(seq, r);
        return false;
      }
      this.live.add(seq);
      return true;
    }
    seq.reserveBlocks(need - held);
    if (!this.managers[r]!.allocateInto(need - held, seq._table, held)) {
      if (startedEmpty) this.releaseBlocks(seq, r);
      if (newSingle) this.releaseSingle(seq, r);
      if (seq._numBlocks === 0 && seq._single < 0) this.live.delete(seq);
      return false;
    }
    // The block a swap would have copied is full now; growth makes it moot (seed: no swap when growing).
    seq._needSwap = false;
    seq._numBlocks = need;
    this.live.add(seq);
    return true;
  }

  tryAllocate(sequence: Sequence): boolean {
    const seq = this.own(sequence);
    const r = this.place(seq);
    const newSingle = seq._single < 0;
    if (newSingle && !this.acquireSingle(seq, r)) return false;
    const mgr = this.managers[r]!;
    const B = this.blockSize;
    const heldBefore = seq._numBlocks;
    const sharedBefore = seq._shared;
    // Continue the match only from a purely shared prefix (the reference appends
    // already-held blocks a second time here; we do not).
    if (this.enablePrefixCache && heldBefore === sharedBefore) {
      const nFull = Math.floor(seq._numTokens / B);
      if (nFull > heldBefore) {
        seq.reserveBlocks(nFull - heldBefore);
        const parent = heldBefore > 0 ? seq._table[heldBefore - 1]! : 0;
        const hits = mgr.matchInto(seq._tokens, heldBefore, nFull - heldBefore, parent, seq._table, heldBefore);
        seq._numBlocks += hits;
        seq._shared += hits;
      }
    }
    const need = Math.ceil(seq._numTokens / B) - seq._numBlocks;
    if (need > 0) {
      seq.reserveBlocks(need);
      if (!mgr.allocateInto(need, seq._table, seq._numBlocks)) {
        mgr.releaseFrom(seq._table, heldBefore, seq._numBlocks);
        seq._numBlocks = heldBefore;
        seq._shared = sharedBefore;
        if (newSingle) this.releaseSingle(seq, r);
        if (seq._numBlocks === 0 && seq._single < 0) this.live.delete(seq);
        return false;
      }
      seq._numBlocks += need;
    }
    seq._kvCached = seq._numTokens;
    this.live.add(seq);
    return true;
  }

  allocateShared(sequence: Sequence): number {
    const seq = this.own(sequence);
    const r = this.place(seq);
    if (seq._numBlocks === 0 && this.enablePrefixCache) {
      this.attachShared(seq, r);
      if (seq._numBlocks > 0) this.live.add(seq);
    }
    return seq._shared;
  }

  /**
   * Matches the full blocks of the prompt and attaches the hits. An exact
   * prompt hit gives its last block back so at least one token is computed.
   */
  protected attachShared(seq: Sequence, r: number): void {
    const mgr = this.managers[r]!;
    const B = this.blockSize;
    const nFull = Math.floor(seq._numTokens / B);
    if (nFull === 0) return;
    seq.reserveBlocks(nFull);
    let hits = mgr.matchInto(seq._tokens, 0, nFull, 0, seq._table, 0);
    if (hits === 0) return;
    if (hits * B === seq._numTokens) {
      mgr.releaseFrom(seq._table, hits - 1, hits);
      hits--;
    }
    seq._numBlocks = hits;
    seq._shared = hits;
    seq._kvCached = hits * B;
  }

  /** Beam search: the fork gets its own copy of the shared last block. */
  private swapLastBlock(seq: Sequence, r: number): boolean {
    const mgr = this.managers[r]!;
    if (!mgr.allocateInto(1, this.scratch, 0)) return false;
    const last = seq._numBlocks - 1;
    const src = seq._table[last]!;
    const dst = this.scratch[0]!;
    seq._table[last] = dst;
    this.releaseId(mgr, src);
    if (seq._shared > last) seq._shared = last;
    seq._needSwap = false;
    this.swaps[r]!.push({ src, dst });
    return true;
  }

  /** @internal */
  forkSequence(parent: Sequence, child: Sequence): void {
    this.own(parent, 'parent');
    if (parent._numBlocks > 0) this.managers[parent._dpRank]!.retainFrom(parent._table, 0, parent._numBlocks);
    if (child._numBlocks > 0) this.live.add(child);
  }

  private acquireSingle(seq: Sequence, r: number): boolean {
    if (!this.singles[r]!.allocateInto(1, this.scratch, 0)) return false;
    seq._single = this.scratch[0]!;
    return true;
  }

  private releaseSingle(seq: Sequence, r: number): void {
    this.releaseId(this.singles[r]!, seq._single);
    seq._single = -1;
  }

  private readonly scratch = new Int32Array(1);

  /** Drops one reference on one id the pool itself took. */
  private releaseId(mgr: CoreManager, id: number): void {
    this.scratch[0] = id;
    const code = mgr.releaseFrom(this.scratch, 0, 1);
    if (code < 0) throw new Error(`kvpool: internal error releasing block ${id} (core code ${code})`);
  }

  /** Drops the sequence's references on its blocks in ascending logical order. */
  private releaseBlocks(seq: Sequence, r: number): void {
    const code = this.managers[r]!.releaseFrom(seq._table, 0, seq._numBlocks);
    if (code < 0) throw new Error(`kvpool: internal error releasing a sequence's blocks (core code ${code})`);
    seq.resetBlocks();
  }

  // ---- caching and release ----

  cache(sequence: Sequence, numTokens?: number): void {
    const seq = this.own(sequence);
    const avail =
      numTokens === undefined
        ? seq._kvCached
        : Math.min(checkInt('numTokens', numTokens), seq._numBlocks * this.blockSize, seq._numTokens);
    this.cacheUpTo(seq, avail);
  }

  /** Inserts the full blocks of tokens [0, numTokens) after the shared prefix. */
  protected cacheUpTo(seq: Sequence, numTokens: number): void {
    if (!this.enablePrefixCache || seq._dpRank < 0) return;
    const n = Math.min(Math.floor(numTokens / this.blockSize), seq._numBlocks);
    const first = seq._shared;
    if (n <= first) return;
    const parent = first > 0 ? seq._table[first - 1]! : 0;
    const r = this.managers[seq._dpRank]!.insertFrom(seq._tokens, seq._table, first, n - first, parent);
    if (r < 0) throw new Error(`kvpool: internal error caching a sequence (core code ${r})`);
  }

  deallocate(arg: Sequence | readonly Sequence[]): void {
    if (Array.isArray(arg)) {
      arg.forEach((s, i) => this.own(s, `sequences[${i}]`));
      for (const s of arg as readonly Sequence[]) this.release(s, true);
      return;
    }
    this.release(this.own(arg), true);
  }

  deallocateWithoutCache(sequence: Sequence): void {
    this.release(this.own(sequence), false);
  }

  /** Seed 8: cache, give back the single id, drop the blocks in order, reset. */
  protected release(seq: Sequence, cacheFirst: boolean): void {
    const r = seq._dpRank;
    if (r < 0) return;
    if (cacheFirst) this.cacheUpTo(seq, seq._kvCached);
    if (seq._single >= 0) this.releaseSingle(seq, r);
    this.releaseBlocks(seq, r);
    this.live.delete(seq);
  }

  // ---- figures ----

  numFreeBlocks(): number[] {
    return this.managers.map((m) => m.numFreeBlocks());
  }

  numUsedBlocks(): number[] {
    return this.managers.map((m) => m.numUsedBlocks());
  }

  numBlocksInPrefixCache(): number[] {
    return this.managers.map((m) => m.numBlocksInPrefixCache());
  }

  /**
   * Utilization (used / total) of the rank a new sequence would go to, i.e.
   * the least loaded one, as the reference reports it. `stats()` has every rank.
   */
  kvCacheUtilization(): number {
    return this.managers[this.chooseRank()]!.kvCacheUtilization();
  }

  /** Mean utilization over ranks (the reference's gpu cache usage). */
  gpuCacheUsage(): number {
    return this.managers.reduce((a, m) => a + m.kvCacheUtilization(), 0) / this.dpSize;
  }

  stats(): PoolRankStats[] {
    return this.managers.map((m, r) => ({
      ...m.stats(),
      singleBlocksFree: this.singles[r]!.numFreeBlocks(),
      singleBlocksUsed: this.singles[r]!.numUsedBlocks(),
    }));
  }

  /** Pending block copies of beam-search swaps on `dpRank`. */
  swapTransferInfos(dpRank: number): readonly BlockTransferInfo[] {
    checkInt('dpRank', dpRank, 0, this.dpSize - 1);
    return this.swaps[dpRank]!;
  }

  /** Forgets the pending swap copies (the worker did them). */
  resetTransferInfos(): void {
    for (const s of this.swaps) s.length = 0;
  }

  /** Sequences that hold blocks or a single id of this pool. */
  liveSequences(): ReadonlySet<Sequence> {
    return this.live;
  }

  check(): void {
    for (const m of this.managers) m.check();
    for (const s of this.singles) s.check();
    const kv = this.managers.map((m) => new Int32Array(m.numBlocks));
    const single = this.singles.map((m) => new Int32Array(m.numBlocks));
    for (const seq of this.live) {
      const r = seq._dpRank;
      if (seq._owner !== this || r < 0 || r >= this.dpSize) throw new Error('kvpool: a live sequence is not placed in this pool');
      if (seq._shared > seq._numBlocks) throw new Error('kvpool: a sequence has more shared blocks than blocks');
      for (let i = 0; i < seq._numBlocks; i++) kv[r]![seq._table[i]!]!++;
      if (seq._single >= 0) single[r]![seq._single]!++;
    }
    for (let r = 0; r < this.dpSize; r++) {
      this.addExtraHolders(r, kv[r]!);
      compareHolders(`rank ${r} KV`, this.managers[r]!.holderCounts(), kv[r]!);
      compareHolders(`rank ${r} single-id`, this.singles[r]!.holderCounts(), single[r]!);
    }
  }

  /** Holders the pool keeps besides sequences (none here; in-flight plans in subclasses). */
  protected addExtraHolders(_rank: number, _counts: Int32Array): void {}

  /** Gives every manager's memory back to the core. */
  dispose(): void {
    for (const m of this.managers) m.dispose();
    for (const s of this.singles) s.dispose();
  }
}

function compareHolders(what: string, actual: Int32Array, expected: Int32Array): void {
  for (let id = 1; id < actual.length; id++) {
    if (actual[id] !== expected[id]) {
      throw new Error(`kvpool: ${what} block ${id} has ${actual[id]} holders but live sequences hold it ${expected[id]} times`);
    }
  }
}
