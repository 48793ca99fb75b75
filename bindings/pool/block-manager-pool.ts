// BlockManagerPool (seed sections 5 and 8): the KVCacheManager that places
// sequences on dp ranks, gives each a single id, reuses prefix-cache blocks
// and grows, caches and releases their block tables.

import { loadCore, plainCore } from '../core/plain-core.js';
import { BlockManagerImpl } from '../managers/block-manager-impl.js';
import type { CompositeBlockManager, SubManagerStats } from '../managers/composite-block-manager.js';
import { ConcurrentBlockManagerImpl } from '../managers/concurrent-block-manager-impl.js';
import type { KVEvent } from '../managers/kv-events.js';
import { checkFits } from '../managers/core-manager.js';
import type { PoolManager } from '../managers/pool-manager.js';
import { SingleBlockManager } from '../managers/single-block-manager.js';
import { checkBool, checkInt, checkKeys, checkObject, checkSeed, describe } from '../validate.js';
import type { LinearStateCacheOp, LinearStatePrefixCache, LinearStateStats } from '../linear-state/linear-state-prefix-cache.js';
import {
  LINEAR_STATE_KEYS, parseLinearStateOptions, PoolLinearState, prefixHashesOf, type LinearStatePoolOptions,
} from '../linear-state/pool-linear-state.js';
import { COMPOSITE_OPTION_KEYS, CompositeRanks, type CompositePoolOptions } from './composite-ranks.js';
import type { BlockTransferInfo, KVCacheManager } from './kv-cache-manager.js';

export type { PoolRankStats } from './metrics.js';
import { checkLabels, rankStats, renderMetrics, sumStats, type PoolRankStats } from './metrics.js';
import { saltKey } from './salt.js';
import { Sequence, type SequenceOwner } from './sequence.js';
import { parseEvictionPolicy, type EvictionPolicy } from '../managers/eviction-policy.js';
import { XTENSOR_POOL_KEYS, xtensorManagerFactory, type XTensorPoolOptions } from './xtensor-options.js';

export interface BlockManagerPoolOptions extends CompositePoolOptions, LinearStatePoolOptions, XTensorPoolOptions {
  /** Physical KV blocks per dp rank, padding id 0 included (>= 2). */
  numBlocks: number;
  /** Tokens per block (>= 1). */
  blockSize: number;
  /** Data-parallel ranks, one manager each (default 1). */
  dpSize?: number;
  /** Reuse full blocks through the prefix cache (default true; false, and only false, with enableXtensor). */
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
  /**
   * Which cached block each rank evicts first: 'lru' (default, the reference's
   * order), 'lfu', or 'priority' (Sequence.setRetention marks; see setTime).
   */
  evictionPolicy?: EvictionPolicy;
}

const KEYS = [
  'numBlocks', 'blockSize', 'dpSize', 'enablePrefixCache', 'singleBlockCapacity', 'seed', 'enableDisaggPd', 'enableKvcacheStore', 'evictionPolicy',
  ...COMPOSITE_OPTION_KEYS, ...LINEAR_STATE_KEYS,
] as const;

export function parsePoolOptions(o: BlockManagerPoolOptions, extraKeys: readonly string[] = []) {
  checkObject('options', o);
  checkKeys('options', o, [...KEYS, ...XTENSOR_POOL_KEYS, ...extraKeys]);
  const numBlocks = checkInt('options.numBlocks', o.numBlocks, 2);
  const blockSize = checkInt('options.blockSize', o.blockSize, 1);
  const xtensor = xtensorManagerFactory(o, numBlocks, blockSize);
  const enablePrefixCache = checkBool('options.enablePrefixCache', o.enablePrefixCache ?? xtensor === null);
  if (xtensor && enablePrefixCache) throw new RangeError('options.enablePrefixCache cannot be true with enableXtensor (XTensor blocks have no prefix cache)');
  parseEvictionPolicy('options.evictionPolicy', o.evictionPolicy);
  if (o.evictionPolicy !== undefined && o.evictionPolicy !== 'lru' && (!enablePrefixCache || o.managerTypes !== undefined)) {
    throw new RangeError(`options.evictionPolicy '${o.evictionPolicy}' needs the plain prefix cache (enablePrefixCache, no managerTypes)`);
  }
  return {
    evictionPolicy: o.evictionPolicy,
    numBlocks,
    blockSize,
    dpSize: checkInt('options.dpSize', o.dpSize ?? 1, 1, 4096),
    enablePrefixCache,
    xtensor,
    singleBlockCapacity: checkInt('options.singleBlockCapacity', o.singleBlockCapacity ?? 202, 2),
    seed: o.seed ?? 1024,
    linearState: parseLinearStateOptions(o),
    enableDisaggPd: checkBool('options.enableDisaggPd', o.enableDisaggPd ?? false),
    enableKvcacheStore: checkBool('options.enableKvcacheStore', o.enableKvcacheStore ?? false),
  };
}

export class BlockManagerPool implements KVCacheManager, SequenceOwner {
  readonly blockSize: number;
  readonly numBlocks: number;
  readonly dpSize: number;
  readonly enablePrefixCache: boolean;
  /** XXH3-128 seed of the block hash chain (and of cache-salt digests). */
  readonly seed: number | bigint;
  /** @internal one KV block manager per dp rank */
  readonly managers: PoolManager[] = [];
  /** @internal one single-id manager per dp rank */
  readonly singles: SingleBlockManager[] = [];
  /** Sequences holding anything from this pool (for audits). */
  protected readonly live = new Set<Sequence>();
  private readonly swaps: BlockTransferInfo[][] = [];
  /**
   * @internal A cache() after a publish (or a match) takes the hashes already
   * stamped on the sequence's blocks (Sequence._hashed) instead of hashing
   * its tokens again. The host tier rearranges tables and keeps it off.
   */
  protected readonly reuseStampedHashes: boolean = true;
  /** @internal composite KV managers per rank when `managerTypes` is given (seed 5.1); `managers` then holds their capacity sub-managers */
  readonly composite: CompositeRanks | null;
  /** @internal linear-state caches and hooks (null when linear state is off) */
  protected readonly linear: PoolLinearState | null = null;
  private disposed = false;

  /** True once `dispose()` ran. */
  get isDisposed(): boolean {
    return this.disposed;
  }

  /** @internal Throws once the pool is disposed: every public call starts here (or in `own`). */
  protected ensureOpen(): void {
    if (this.disposed) throw new Error(`kvpool: this ${this.constructor.name} was disposed; it cannot be used any more`);
  }

  constructor(options: BlockManagerPoolOptions) {
    const o = parsePoolOptions(options);
    checkSeed('options.seed', o.seed);
    // Each of these replaces the plain KV manager of a rank; the reference never combines them.
    const kinds = [
      options.managerTypes !== undefined && 'managerTypes',
      o.linearState.enabled && 'enableLinearState',
      o.xtensor && 'enableXtensor',
      (o.enableDisaggPd || o.enableKvcacheStore) && 'enableDisaggPd/enableKvcacheStore',
    ];
    const set = kinds.filter((k): k is string => typeof k === 'string');
    if (set.length > 1) throw new TypeError(`options: ${set.join(' and ')} cannot be combined`);
    this.composite = options.managerTypes === undefined ? null : new CompositeRanks(options);
    this.blockSize = o.blockSize;
    this.numBlocks = o.numBlocks;
    this.dpSize = o.dpSize;
    this.enablePrefixCache = o.enablePrefixCache && this.composite === null;
    this.seed = o.seed;
    // Seed 5.1: managers other threads touch take a lock (shared-memory core).
    const Impl = o.enableDisaggPd || o.enableKvcacheStore ? ConcurrentBlockManagerImpl : BlockManagerImpl;
    if (Impl === BlockManagerImpl && this.composite === null && !o.xtensor) {
      const rank = [{ numBlocks: o.numBlocks, prefixOn: o.enablePrefixCache }, { numBlocks: o.singleBlockCapacity, prefixOn: false }];
      checkFits(plainCore(), `a pool of ${o.dpSize} rank(s) of ${o.numBlocks} blocks`, Array.from({ length: o.dpSize }, () => rank).flat());
    }
    try {
      for (let r = 0; r < o.dpSize; r++) {
        this.managers.push(
          this.composite?.addRank() ??
          o.xtensor?.(r) ??
            new Impl({
              numBlocks: o.numBlocks, blockSize: o.blockSize, enablePrefixCache: o.enablePrefixCache, seed: o.seed,
              ...(o.evictionPolicy !== undefined && { evictionPolicy: o.evictionPolicy }),
            }),
        );
        this.singles.push(new SingleBlockManager({ numBlocks: o.singleBlockCapacity }));
        this.swaps.push([]);
      }
      const ls = o.linearState;
      if (ls.enabled) this.linear = new PoolLinearState(o.dpSize, ls.numSlots, ls.reuse);
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
    this.ensureOpen();
    if (!(seq instanceof Sequence)) throw new TypeError(`${name} must be a Sequence, got ${describe(seq)}`);
    if (seq._owner !== null && seq._owner !== this) {
      throw new Error(`${name} belongs to another pool; a sequence is used with one pool only`);
    }
    return seq;
  }

  /**
   * The rank a new sequence goes to: most free blocks, lowest rank on ties;
   * with linear state, ranks without a free single id are skipped (rank 0
   * when no rank is left).
   */
  protected chooseRank(): number {
    let best = 0;
    let bestFree = 0;
    for (let r = 0; r < this.dpSize; r++) {
      if (this.linear && this.singles[r]!.numFreeBlocks() === 0) continue;
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
      if (seq._salt !== null && seq._saltKey === null) seq._saltKey = saltKey(seq._salt, this.seed);
    }
    return seq._dpRank;
  }

  // ---- allocation ----

  allocate(sequence: Sequence, numTokens?: number): boolean;
  allocate(sequences: readonly Sequence[]): boolean;
  allocate(arg: Sequence | readonly Sequence[], numTokens?: number): boolean {
    this.ensureOpen();
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
    // A decode step that fits the blocks held (most of them): nothing to do.
    // Holding blocks means placed, live, with a single id; a pending swap or a
    // composite rank takes the full path.
    const held0 = seq._numBlocks;
    if (held0 > 0 && numTokens <= held0 * this.blockSize && !seq._needSwap && seq._single >= 0 && this.composite === null) return true;
    const r = this.place(seq);
    const startedEmpty = seq._numBlocks === 0;
    const newSingle = seq._single < 0;
    if (newSingle && !this.acquireSingle(seq, r)) return false;
    if (this.composite) return this.allocateComposite(seq, r, numTokens, newSingle);
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
    if (startedEmpty) this.live.add(seq); // one that held blocks before the call is live already
    return true;
  }

  tryAllocate(sequence: Sequence): boolean {
    const seq = this.own(sequence);
    const r = this.place(seq);
    const newSingle = seq._single < 0;
    if (newSingle && !this.acquireSingle(seq, r)) return false;
    if (this.composite) {
      if (!this.allocateComposite(seq, r, seq._numTokens, newSingle)) return false;
      seq._kvCached = seq._numTokens;
      return true;
    }
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
        let hits = mgr.matchInto(seq._tokens, heldBefore, nFull - heldBefore, parent, seq._table, heldBefore, seq._saltKey);
        if (this.linear) hits = this.linear.trim(this.coreKv(r), seq, r, heldBefore, heldBefore + hits) - heldBefore;
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
        if (seq._hashed > heldBefore) seq._hashed = heldBefore;
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

  /** Composite ranks (SEMANTICS B.3, B.5): every table grows or none does; no prefix cache, no beam swap. */
  private allocateComposite(seq: Sequence, r: number, numTokens: number, newSingle: boolean): boolean {
    const c = this.composite!;
    if (c.allocate(seq, r, numTokens)) {
      this.live.add(seq);
      return true;
    }
    if (newSingle) this.releaseSingle(seq, r);
    if (!c.holds(seq) && seq._single < 0) this.live.delete(seq);
    return false;
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
    let hits = mgr.matchInto(seq._tokens, 0, nFull, 0, seq._table, 0, seq._saltKey);
    if (this.linear) hits = this.linear.trim(this.coreKv(r), seq, r, 0, hits);
    if (hits === 0) return;
    if (hits * B === seq._numTokens) {
      mgr.releaseFrom(seq._table, hits - 1, hits);
      hits--;
    }
    seq._numBlocks = hits;
    seq._shared = hits;
    seq._hashed = hits;
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
    if (seq._hashed > last) seq._hashed = last;
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
    this.composite?.fork(parent, child);
    if (child._numBlocks > 0 || this.composite?.holds(child)) this.live.add(child);
  }

  private acquireSingle(seq: Sequence, r: number): boolean {
    if (!this.singles[r]!.allocateInto(1, this.scratch, 0)) return false;
    seq._single = this.scratch[0]!;
    // The live linear-state slot comes and goes with the single id.
    if (this.linear && !this.linear.acquire(seq, r)) {
      this.releaseId(this.singles[r]!, seq._single);
      seq._single = -1;
      return false;
    }
    return true;
  }

  private releaseSingle(seq: Sequence, r: number): void {
    this.linear?.release(seq, r);
    this.releaseId(this.singles[r]!, seq._single);
    seq._single = -1;
  }

  private readonly scratch = new Int32Array(1);

  /** Drops one reference on one id the pool itself took. */
  private releaseId(mgr: Pick<PoolManager, 'releaseFrom'>, id: number): void {
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
    const mgr = this.managers[seq._dpRank]!;
    const known = this.reuseStampedHashes ? Math.max(0, Math.min(seq._hashed, n) - first) : 0;
    const r = seq._retention !== null && mgr instanceof BlockManagerImpl
      ? mgr.insertWithRetention(seq._retention, seq._tokens, seq._table, first, n - first, parent, seq._saltKey)
      : mgr.insertFrom(seq._tokens, seq._table, first, n - first, parent, seq._saltKey, known);
    if (r < 0) throw new Error(`kvpool: internal error caching a sequence (core code ${r})`);
    if (this.reuseStampedHashes && seq._hashed < n) seq._hashed = n;
  }

  /** The clock of the 'priority' eviction policy (0 at first; see setTime). */
  get time(): number {
    this.ensureOpen();
    const m = this.managers[0];
    return m instanceof BlockManagerImpl ? m.time : 0;
  }

  /**
   * Moves the clock of every rank to `t` (any unit, never backwards): under
   * evictionPolicy 'priority', blocks whose retention ended by then fall back
   * to priority 35. Retentions end at (time of caching) + duration.
   */
  setTime(t: number): void {
    this.ensureOpen();
    const now = this.time;
    if (typeof t !== 'number') throw new TypeError(`t must be a number, got ${describe(t)}`);
    if (!(t >= now) || t === Infinity) throw new RangeError(`t must be a finite time >= the current time ${now}, got ${t}`);
    for (const m of this.managers) if (m instanceof BlockManagerImpl) m.setTime(t);
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
    this.composite?.release(seq, r);
    this.releaseBlocks(seq, r);
    this.live.delete(seq);
  }

  // ---- figures ----

  numFreeBlocks(): number[] {
    this.ensureOpen();
    return this.managers.map((m) => m.numFreeBlocks());
  }

  numUsedBlocks(): number[] {
    this.ensureOpen();
    return this.managers.map((m) => m.numUsedBlocks());
  }

  numBlocksInPrefixCache(): number[] {
    this.ensureOpen();
    return this.managers.map((m) => m.numBlocksInPrefixCache());
  }

  /**
   * Utilization (used / total) of the rank a new sequence would go to, i.e.
   * the least loaded one, as the reference reports it. `stats()` has every rank.
   */
  kvCacheUtilization(): number {
    this.ensureOpen();
    return this.managers[this.chooseRank()]!.kvCacheUtilization();
  }

  /** Mean utilization over ranks (the reference's gpu cache usage). */
  gpuCacheUsage(): number {
    this.ensureOpen();
    return this.managers.reduce((a, m) => a + m.kvCacheUtilization(), 0) / this.dpSize;
  }

  stats(): PoolRankStats[] {
    this.ensureOpen();
    return this.managers.map((m, r) =>
      rankStats(m.stats(), this.blockSize, this.singles[r]!.numFreeBlocks(), this.singles[r]!.numUsedBlocks()),
    );
  }

  /** `stats()` summed over ranks (hit rate recomputed from the sums). */
  totalStats(): PoolRankStats {
    return sumStats(this.stats());
  }

  /**
   * Every rank's figures in the Prometheus text format (`kvpool_*` metrics,
   * label `dp_rank`, plus the constant `labels` given, e.g. `{ model }`).
   */
  metricsText(labels: Record<string, string> = {}): string {
    return renderMetrics(this.stats(), checkLabels(labels));
  }

  // ---- KV-cache events ----

  /** Starts (true) or stops recording KV-cache events on every rank (off by default). */
  recordEvents(on: boolean): void {
    this.ensureOpen();
    checkBool('on', on);
    for (const m of this.managers) m.recordEvents(on);
  }

  /** The events recorded since the last drain, rank by rank, each rank's in order; forgets them. */
  drainEvents(): KVEvent[] {
    this.ensureOpen();
    const out: KVEvent[] = [];
    this.managers.forEach((m, r) => m.drainEvents(r, out));
    return out;
  }

  /** Evicts every cached block no sequence holds, on every rank; returns how many per rank. */
  resetPrefixCache(): number[] {
    this.ensureOpen();
    return this.managers.map((m) => m.resetPrefixCache());
  }

  /** Pending block copies of beam-search swaps on `dpRank`. */
  swapTransferInfos(dpRank: number): readonly BlockTransferInfo[] {
    this.ensureOpen();
    checkInt('dpRank', dpRank, 0, this.dpSize - 1);
    return this.swaps[dpRank]!;
  }

  /** Forgets the pending swap copies (the worker did them). */
  resetTransferInfos(): void {
    this.ensureOpen();
    for (const s of this.swaps) s.length = 0;
  }

  /** The composite KV manager of `dpRank` (null unless `managerTypes` was given). */
  compositeManager(dpRank: number): CompositeBlockManager | null {
    this.ensureOpen();
    checkInt('dpRank', dpRank, 0, this.dpSize - 1);
    return this.composite?.managers[dpRank] ?? null;
  }

  /** Counters of every sub-manager of `dpRank` (empty unless `managerTypes` was given). */
  subManagerStats(dpRank: number): SubManagerStats[] {
    return this.compositeManager(dpRank)?.subManagerStats() ?? [];
  }

  // ---- linear state ----

  /** @internal */
  prefixHashes(seq: Sequence, nBlocks: number): Uint8Array {
    this.ensureOpen();
    if (nBlocks <= 0) return new Uint8Array(0);
    return prefixHashesOf(this.coreKv(Math.max(0, seq._dpRank)), seq, nBlocks);
  }

  /** The linear-state cache of `dpRank` (pools created with `enableLinearState`). */
  linearStateCache(dpRank: number): LinearStatePrefixCache {
    this.ensureOpen();
    checkInt('dpRank', dpRank, 0, this.dpSize - 1);
    return this.requireLinear('linearStateCache').caches[dpRank]!;
  }

  /**
   * The linear-state cache op of `sequence` for a forward ending at `stepEnd`
   * tokens (SEMANTICS C.3; marks the sequence initialized). Resolve a batch's
   * ops with `linearStateCache(rank).resolveCacheOps(ops, sequences)`.
   */
  linearStateCacheOp(sequence: Sequence, stepEnd: number): LinearStateCacheOp {
    const seq = this.own(sequence);
    const lin = this.requireLinear('linearStateCacheOp');
    if (seq._dpRank < 0) throw new Error('linearStateCacheOp: the sequence has not been allocated yet');
    return lin.cacheOp(this.coreKv(seq._dpRank), seq, stepEnd);
  }

  /** Per rank: the cache's figures plus the shared KV blocks trimmed for lack of a checkpoint. */
  linearStateStats(): (LinearStateStats & { trimmedBlocks: number })[] {
    this.ensureOpen();
    const lin = this.requireLinear('linearStateStats');
    return lin.caches.map((c, r) => ({ ...c.stats(), trimmedBlocks: lin.trimmedBlocks[r]! }));
  }

  /** The rank's core-backed KV manager (block hashes live there); XTensor ranks have none. */
  private coreKv(r: number): BlockManagerImpl {
    const m = this.managers[r];
    if (!(m instanceof BlockManagerImpl)) throw new Error('kvpool: this rank has no core-backed KV manager (block hashes need one)');
    return m;
  }

  private requireLinear(what: string): PoolLinearState {
    if (!this.linear) throw new Error(`${what}: this pool was created without enableLinearState`);
    return this.linear;
  }

  /** Sequences that hold blocks or a single id of this pool. */
  liveSequences(): ReadonlySet<Sequence> {
    this.ensureOpen();
    return this.live;
  }

  check(): void {
    this.ensureOpen();
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
      this.composite?.checkRank(r, kv[r]!, this.live);
      compareHolders(`rank ${r} KV`, this.managers[r]!.holderCounts(), kv[r]!);
      compareHolders(`rank ${r} single-id`, this.singles[r]!.holderCounts(), single[r]!);
    }
    this.linear?.check(this.live);
  }

  /** Holders the pool keeps besides sequences (none here; in-flight plans in subclasses). */
  protected addExtraHolders(_rank: number, _counts: Int32Array): void {}

  /** Gives every manager's memory back to the core. The pool is unusable afterwards: every call throws. */
  dispose(): void {
    this.disposed = true;
    this.composite?.dispose();
    for (const m of this.managers) m.dispose();
    for (const s of this.singles) s.dispose();
    this.linear?.dispose();
  }
}

function compareHolders(what: string, actual: Int32Array, expected: Int32Array): void {
  for (let id = 1; id < actual.length; id++) {
    if (actual[id] !== expected[id]) {
      throw new Error(`kvpool: ${what} block ${id} has ${actual[id]} holders but live sequences hold it ${expected[id]} times`);
    }
  }
}
