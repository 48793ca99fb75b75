// BlockManagerPool: the KVCacheManager. It chooses each sequence's data-parallel
// rank, owns single ids, keeps track of the sequences holding anything, and
// hands everything a rank does with blocks to that rank's manager through one
// seam (ranks/rank-manager.ts). What a rank is (plain, composite, XTensor; with
// linear state, a host tier, locks) was decided when it was built.

import { loadCore, plainCore } from '../core/plain-core.js';
import { ConcurrentBlockManagerImpl } from '../managers/concurrent-block-manager-impl.js';
import type { CompositeBlockManager, SubManagerStats } from '../managers/composite-block-manager.js';
import { checkFits } from '../managers/core-manager.js';
import { parseRecordOptions, SaltNames, type KVEvent, type KVEventSource, type RecordEventsOptions } from '../managers/kv-events.js';
import type { CoreBytes, CoreInstance } from '../core/core-instance.js';
import type { PoolManager } from '../managers/pool-manager.js';
import type { SingleBlockManager } from '../managers/single-block-manager.js';
import type { LinearStateCacheOp, LinearStatePrefixCache, LinearStateStats } from '../linear-state/linear-state-prefix-cache.js';
import { buildRank } from '../ranks/build-rank.js';
import { CompositeRank } from '../ranks/composite-rank.js';
import type { LinearStateAddOn } from '../ranks/linear-state-add-on.js';
import type { BlockTransferInfo, RankManager } from '../ranks/rank-manager.js';
import type { SequenceState } from '../ranks/sequence-state.js';
import { checkBool, checkInt, checkKeys, checkObject, describe } from '../validate.js';
import type { KVCacheManager } from './kv-cache-manager.js';
import { checkLabels, rankStats, renderMetrics, sumStats, type PoolRankStats } from './metrics.js';
import { parsePoolOptions, type BlockManagerPoolOptions, type PoolConfig } from './pool-options.js';
import { saltKey } from './salt.js';
import { Sequence, type ForkOptions, type SequenceOwner } from './sequence.js';
import { SingleIds } from './single-ids.js';
import { RawBlocks } from './raw-blocks.js';
import { drainRankRecords, drainRanks, recordOnRanks, snapshotRanks } from './pool-events.js';

export type { BlockManagerPoolOptions } from './pool-options.js';
export type { PoolRankStats } from './metrics.js';

/** Blocks the raw `allocateBlocks` handed out, and the rank they came from. */
export interface RankBlocks {
  readonly dpRank: number;
  readonly blockIds: Int32Array;
}

export class BlockManagerPool implements KVCacheManager, SequenceOwner {
  readonly blockSize: number;
  readonly numBlocks: number;
  readonly dpSize: number;
  readonly enablePrefixCache: boolean;
  /** XXH3-128 seed of the block hash chain (and of cache-salt digests). */
  readonly seed: number | bigint;
  /** @internal the salts of placed sequences, by digest (events name a salted block 0 by its salt) */
  readonly saltNames = new SaltNames();
  /** @internal one rank manager per dp rank */
  readonly ranks: RankManager[] = [];
  /** @internal each rank's KV manager (a composite rank's capacity sub-manager) */
  readonly managers: PoolManager[] = [];
  private readonly singleIds = new SingleIds(this.ranks);
  /** @internal one single-id manager per dp rank */
  readonly singles: SingleBlockManager[] = this.singleIds.managers;
  /** Sequences holding anything of this pool. */
  protected readonly live = new Set<Sequence>();
  /** Blocks of `allocateBlocks`, which the caller holds. */
  private readonly raw = new RawBlocks();
  private disposed = false;

  constructor(options: BlockManagerPoolOptions, /** @internal */ parsed?: PoolConfig) {
    const o = parsed ?? parsePoolOptions(options);
    this.blockSize = o.blockSize;
    this.numBlocks = o.numBlocks;
    this.dpSize = o.dpSize;
    this.enablePrefixCache = o.rank.prefixCache;
    this.seed = o.seed;
    if (o.rank.kind === 'plain' && o.rank.concurrent === null) {
      const kv = { numBlocks: o.numBlocks, prefixOn: o.rank.prefixCache };
      const rank = [kv, { numBlocks: o.singleBlockCapacity, prefixOn: false }];
      if (o.rank.hostNumBlocks !== null) rank.push({ numBlocks: o.rank.hostNumBlocks, prefixOn: true });
      if (o.rank.linearState) rank.push({ numBlocks: o.rank.linearState.numSlots, prefixOn: true });
      checkFits(plainCore(), `a pool of ${o.dpSize} rank(s) of ${o.numBlocks} blocks`, Array.from({ length: o.dpSize }, () => rank).flat());
    }
    try {
      for (let r = 0; r < o.dpSize; r++) {
        const rank = buildRank(o.rank, r);
        this.ranks.push(rank);
        this.managers.push(rank.kv);
        this.raw.addRank(rank.kv.numBlocks);
        this.singleIds.addRank(o.singleBlockCapacity);
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
    if (o.rank.concurrent) await ConcurrentBlockManagerImpl.ready();
    return new BlockManagerPool(options, o);
  }

  // ---- sequences and ranks ----

  /** @internal Throws once the pool is disposed: every public call starts here (or in `own`). */
  protected ensureOpen(): void {
    if (this.disposed) throw new Error(`kvpool: this ${this.constructor.name} was disposed; it cannot be used any more`);
  }

  /** True once `dispose()` ran. */
  get isDisposed(): boolean {
    return this.disposed;
  }

  /** Validates that `seq` may be used with this pool; returns its state. */
  protected own(seq: unknown, name = 'sequence'): SequenceState {
    this.ensureOpen();
    if (!(seq instanceof Sequence)) throw new TypeError(`${name} must be a Sequence, got ${describe(seq)}`);
    const s = seq.state;
    if (s.owner !== null && s.owner !== this) {
      const gone = (s.owner as { isDisposed?: boolean }).isDisposed === true ? ' (disposed since: make a new Sequence of the same tokens)' : '';
      throw new Error(`${name} belongs to another pool${gone}; a sequence is used with one pool only`);
    }
    return s;
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
      if (this.ranks[r]!.linear && this.singleIds.exhausted(r)) continue;
      const f = this.ranks[r]!.numFreeBlocks();
      if (f > bestFree) {
        best = r;
        bestFree = f;
      }
    }
    return best;
  }

  /** The rank of `s`, or the one it would be placed on. */
  protected rankFor(s: SequenceState): number {
    return s.dpRank >= 0 ? s.dpRank : this.chooseRank();
  }

  /** Places `s` on rank `r` for good (even if the allocation then fails). */
  protected placeOn(s: SequenceState, r: number): void {
    if (s.dpRank >= 0) return;
    s.dpRank = r;
    s.owner = this;
    this.keySalt(s);
  }

  /** The digest of an unplaced sequence's salt under this pool's seed (a salt set later, or another pool's digest, is replaced). */
  private keySalt(s: SequenceState): void {
    s.saltKey = s.salt === null ? null : saltKey(s.salt, this.seed);
    if (s.saltKey !== null) this.saltNames.add(s.saltKey, s.salt!);
  }

  /**
   * Grows `seq` on its rank (`tryAllocate`: admits its whole prompt instead),
   * placing it first: a new single id (and its live linear-state slot) is
   * taken for the operation and given back if it fails; the live set follows
   * what the sequence holds.
   */
  private grow(seq: Sequence, s: SequenceState, numTokens: number, maxCopyBlocks: number | undefined, tryAllocate: boolean): boolean {
    const r = this.rankFor(s);
    const rank = this.ranks[r]!;
    const linear = rank.linear;
    rank.enter();
    try {
      this.placeOn(s, r);
      const newSingle = s.single < 0;
      if (newSingle && !this.singleIds.acquire(s, r)) return false;
      // A sequence whose live slot was released alone gets a new one (the reference never does).
      const newSlot = !newSingle && linear !== null && s.linearSlot < 0;
      if (newSlot && !linear.acquire(s)) return false;
      if (tryAllocate ? rank.tryAllocate(s) : rank.allocate(s, numTokens, maxCopyBlocks)) {
        this.live.add(seq);
        return true;
      }
      if (newSingle) this.singleIds.release(s, r);
      else if (newSlot) linear.release(s);
      if (!rank.holds(s) && s.single < 0) this.live.delete(seq);
      return false;
    } finally {
      rank.exit();
    }
  }

  // ---- allocation ----

  allocate(sequence: Sequence, numTokens?: number): boolean;
  allocate(sequences: readonly Sequence[]): boolean;
  allocate(arg: Sequence | readonly Sequence[], numTokens?: number): boolean {
    // A decode step's call, made millions of times by a replay: the checks
    // of own() and checkInt's fast path inline, everything else below.
    if (arg instanceof Sequence && !this.disposed) {
      const s = arg.state;
      if (s.owner === this && (numTokens === undefined || ((numTokens | 0) === numTokens && numTokens >= 0))) {
        return this.allocateOne(arg, s, numTokens === undefined ? s.numTokens : numTokens);
      }
    }
    this.ensureOpen();
    if (Array.isArray(arg)) {
      if (numTokens !== undefined) throw new TypeError('numTokens cannot be given with a list of sequences');
      const states = arg.map((s, i) => this.own(s, `sequences[${i}]`));
      return (arg as readonly Sequence[]).every((seq, i) => this.allocateOne(seq, states[i]!, states[i]!.numTokens));
    }
    const seq = arg as Sequence;
    const s = this.own(seq);
    return this.allocateOne(seq, s, numTokens === undefined ? s.numTokens : checkInt('numTokens', numTokens));
  }

  /** Grows `seq` to `numTokens` on its rank (a decode step that fits returns at once). */
  protected allocateOne(seq: Sequence, s: SequenceState, numTokens: number, maxCopyBlocks?: number): boolean {
    if (this.fitsAsIs(s, numTokens)) return true;
    // The host tier's precheck matches the prompt: an unplaced sequence's salt must be keyed first.
    if (s.dpRank < 0) this.keySalt(s);
    this.ranks[this.rankFor(s)]!.precheck(s, numTokens, maxCopyBlocks);
    return this.grow(seq, s, numTokens, maxCopyBlocks, false);
  }

  /** Whether growing placed `s` to `numTokens` needs nothing: its blocks (and its live linear-state slot) hold them already. */
  private fitsAsIs(s: SequenceState, numTokens: number): boolean {
    if (s.single < 0) return false;
    const rank = this.ranks[s.dpRank]!;
    return (s.linearSlot >= 0 || rank.linear === null) && rank.fits(s, numTokens);
  }

  /**
   * @internal Tokens `sequence` can still grow by, one decode step at a time
   * (kvCachedTokens one behind), with every allocate() on the way returning
   * true and changing nothing: fitsAsIs for the sequence's current blocks.
   * 0 when unknown. The replay loop appends such tokens and
   * counts their allocate calls without making them.
   */
  decodeRoom(sequence: Sequence): number {
    const s = sequence.state;
    if (this.disposed || s.owner !== this || s.single < 0) return 0;
    const rank = this.ranks[s.dpRank]!;
    if (rank.decodeRoom !== undefined) return s.linearSlot >= 0 || rank.linear === null ? rank.decodeRoom(s) : 0;
    const cap = s.numBlocks * rank.blockSize;
    // fits() of a block-table rank holds for every count up to a held capacity it accepts.
    return rank.kind === 'plain' && cap > s.numTokens && this.fitsAsIs(s, cap) ? cap - s.numTokens : 0;
  }

  /**
   * @internal The allocate() calls of `count` decode steps of a placed
   * sequence, before their tokens are appended: step j is the call for
   * numTokens + j + 1 tokens. Those that fit its blocks change nothing;
   * each that passes them needs one block, and those are made in one core
   * call, stopping at the first that fails (that call made and failed, as
   * it would be). Returns the steps that succeeded (count, or the index of
   * the step that failed), or -1 when this sequence's rank cannot make them
   * so (the caller then makes the calls).
   */
  decodeSteps(sequence: Sequence, count: number): number {
    const s = sequence.state;
    if (this.disposed || s.owner !== this || s.single < 0 || !Number.isSafeInteger(count) || count < 1) return -1;
    const rank = this.ranks[s.dpRank]!;
    // Only from a state that needs nothing (no swap, beam, host load or live slot owed).
    if (rank.growSteps === undefined || !this.fitsAsIs(s, s.numTokens)) return -1;
    // Steps that fit need nothing; from there every blockSize-th needs a block.
    const room = s.numBlocks * rank.blockSize - s.numTokens;
    if (room < 0) return -1; // tokens past its blocks: a step could need several
    if (count <= room) return count;
    // More blocks than the rank has ids cannot all succeed: the step that
    // fails comes before (a huge count neither sizes the table nor stages ids for nothing).
    const blocks = Math.min(Math.ceil((count - room) / rank.blockSize), rank.kv.numBlocks);
    rank.enter();
    try {
      const got = rank.growSteps(s, blocks);
      if (got < 0) return -1;
      return got === blocks ? count : room + got * rank.blockSize;
    } finally {
      rank.exit();
    }
  }

  tryAllocate(sequence: Sequence): boolean {
    const s = this.own(sequence);
    return this.grow(sequence, s, s.numTokens, undefined, true);
  }

  allocateShared(sequence: Sequence): number {
    const s = this.own(sequence);
    const r = this.rankFor(s);
    const rank = this.ranks[r]!;
    rank.enter();
    try {
      this.placeOn(s, r);
      rank.allocateShared(s);
      if (rank.holds(s)) this.live.add(sequence);
    } finally {
      rank.exit();
    }
    return s.shared;
  }

  /**
   * The reference's raw `allocate(num_tokens)`: enough blocks for `numTokens`
   * tokens from the rank a new sequence would go to, owned by the caller
   * (give them back with `deallocateBlocks`); null when that rank is short.
   */
  allocateBlocks(numTokens: number): RankBlocks | null {
    this.ensureOpen();
    const n = Math.ceil(checkInt('numTokens', numTokens) / this.blockSize);
    const r = this.chooseRank();
    const ids = this.raw.take(this.managers[r]!, r, n);
    return ids === null ? null : { dpRank: r, blockIds: ids };
  }

  /** Gives back blocks `allocateBlocks` handed out on `dpRank` (only those: a sequence's blocks are its own). */
  deallocateBlocks(dpRank: number, blockIds: ArrayLike<number>): void {
    this.ensureOpen();
    checkInt('dpRank', dpRank, 0, this.dpSize - 1);
    this.raw.giveBack(this.managers[dpRank]!, dpRank, blockIds);
  }

  /** The KV block manager of `dpRank` (a composite rank's capacity sub-manager): for audits and views. */
  kvManager(dpRank: number): PoolManager {
    this.ensureOpen();
    checkInt('dpRank', dpRank, 0, this.dpSize - 1);
    return this.managers[dpRank]!;
  }

  /** @internal */
  forkSequence(parent: Sequence, child: Sequence): void {
    const p = this.own(parent, 'parent');
    const rank = this.ranks[p.dpRank]!;
    rank.fork(p, child.state);
    if (rank.holds(child.state)) this.live.add(child);
  }

  /**
   * Beam search as the reference does it: `child`, a surviving beam, takes
   * over `source`'s tokens (and which of them are prompt), cache salt, computed count and blocks (one reference each,
   * taken now); its own blocks are let go at its next allocation, which also
   * copies the shared last block first when `swapLastBlock` (the second and
   * later children of one source) and no new block is needed. `fork` makes a
   * new sequence instead.
   */
  adoptBeam(child: Sequence, source: Sequence, options: ForkOptions = {}): void {
    const c = this.own(child, 'child');
    const s = this.own(source, 'source');
    checkObject('options', options);
    checkKeys('options', options, ['swapLastBlock']);
    const swap = checkBool('options.swapLastBlock', options.swapLastBlock ?? false);
    if (c === s) throw new Error('adoptBeam: child and source are the same sequence');
    if (s.dpRank < 0) throw new Error('adoptBeam: the source has not been allocated yet');
    if (s.beamSource !== null) throw new Error('adoptBeam: the source adopted a beam its next allocation takes; allocate it first');
    if (c.dpRank >= 0 && c.dpRank !== s.dpRank) throw new Error(`adoptBeam: the child is on dp rank ${c.dpRank}, its source on ${s.dpRank}`);
    const rank = this.ranks[s.dpRank]!;
    rank.enter();
    try {
      rank.adoptBeam(c, s, swap);
      this.placeOn(c, s.dpRank);
      // The blocks it takes are chained on the source's salt: it takes the salt with the tokens, as a fork does.
      c.salt = s.salt;
      c.saltKey = s.saltKey;
      if (c.tokens.length < s.numTokens) c.tokens = new Int32Array(s.tokens.length);
      c.tokens.set(s.tokens.subarray(0, s.numTokens));
      c.numTokens = s.numTokens;
      c.numPromptTokens = s.numPromptTokens;
      c.kvCached = s.kvCached;
      this.live.add(child);
    } finally {
      rank.exit();
    }
  }

  // ---- caching and release ----

  cache(sequence: Sequence, numTokens?: number): void {
    const s = this.own(sequence);
    const avail = numTokens === undefined ? s.kvCached : Math.min(checkInt('numTokens', numTokens), s.numBlocks * this.blockSize, s.numTokens);
    if (s.dpRank < 0) return;
    const rank = this.ranks[s.dpRank]!;
    rank.cache(s, avail);
  }

  deallocate(arg: Sequence | readonly Sequence[]): void {
    this.ensureOpen();
    if (Array.isArray(arg)) {
      const states = arg.map((s, i) => this.own(s, `sequences[${i}]`));
      (arg as readonly Sequence[]).forEach((seq, i) => this.release(seq, states[i]!, true));
      return;
    }
    const seq = arg as Sequence;
    this.release(seq, this.own(seq), true);
  }

  deallocateWithoutCache(sequence: Sequence): void {
    this.release(sequence, this.own(sequence), false);
  }

  /** Caches (when asked), lets go of the blocks and the single id, and resets the sequence. */
  protected release(seq: Sequence, s: SequenceState, cacheFirst: boolean): void {
    const r = s.dpRank;
    if (r < 0) return;
    const rank = this.ranks[r]!;
    rank.enter();
    try {
      rank.release(s, cacheFirst);
      if (s.single >= 0) this.singleIds.release(s, r);
    } finally {
      rank.exit();
    }
    this.live.delete(seq);
  }

  // ---- figures ----

  numFreeBlocks(): number[] {
    this.ensureOpen();
    return this.ranks.map((k) => k.numFreeBlocks());
  }

  numUsedBlocks(): number[] {
    this.ensureOpen();
    return this.ranks.map((k) => k.numUsedBlocks());
  }

  numBlocksInPrefixCache(): number[] {
    this.ensureOpen();
    return this.ranks.map((k) => k.numBlocksInPrefixCache());
  }

  /** Utilization (used / total) of the rank a new sequence would go to, as the reference reports it. */
  kvCacheUtilization(): number {
    this.ensureOpen();
    return this.ranks[this.chooseRank()]!.kvCacheUtilization();
  }

  /** Mean utilization over ranks (the reference's gpu cache usage). */
  gpuCacheUsage(): number {
    this.ensureOpen();
    return this.ranks.reduce((a, k) => a + k.kvCacheUtilization(), 0) / this.dpSize;
  }

  stats(): PoolRankStats[] {
    this.ensureOpen();
    return this.ranks.map((k, r) => rankStats(k.stats(), this.blockSize, this.singles[r]!.numFreeBlocks(), this.singles[r]!.numUsedBlocks()));
  }

  /** `stats()` summed over ranks (hit rate recomputed from the sums). */
  totalStats(): PoolRankStats {
    return sumStats(this.stats());
  }

  /** Every rank's figures in the Prometheus text format (`kvpool_*` metrics, label `dp_rank`, plus `labels`). */
  metricsText(labels: Record<string, string> = {}): string {
    return renderMetrics(this.stats(), checkLabels(labels));
  }

  /** The clock of the 'priority' eviction policy (0 at first; see setTime). */
  get time(): number {
    this.ensureOpen();
    return this.ranks[0]!.time();
  }

  /**
   * Moves the clock of every rank to `t` (any unit, never backwards): under
   * evictionPolicy 'priority', blocks whose retention ended by then fall back
   * to priority 35. Retentions end at (time of caching) + duration.
   */
  setTime(t: number): void {
    const now = this.time;
    if (typeof t !== 'number') throw new TypeError(`t must be a number, got ${describe(t)}`);
    if (!(t >= now) || t === Infinity) throw new RangeError(`t must be a finite time >= the current time ${now}, got ${t}`);
    for (const k of this.ranks) k.setTime(t);
  }

  // ---- KV-cache events and transfers ----

  /**
   * Starts (true) or stops recording KV-cache events on every rank (off by
   * default); `options.snapshots` (default false): keep what snapshotEvents needs.
   */
  recordEvents(on: boolean, options?: RecordEventsOptions): void {
    this.ensureOpen();
    checkBool('on', on);
    parseRecordOptions(options);
    recordOnRanks(this.ranks, on, options);
  }

  /**
   * The events recorded since the last drain, rank by rank (each rank's
   * device events, then its host tier's), each source's in order; forgets them.
   */
  drainEvents(): KVEvent[] {
    this.ensureOpen();
    return drainRanks(this.ranks, this.saltNames);
  }

  /**
   * Stored events that announce the cache of `dpRank` (every rank when
   * omitted) again, each block after its cached parent: what a consumer that
   * joins late applies first, then the events drained after this call. Only
   * blocks announced since recording started are in it; pending events stay
   * pending.
   */
  snapshotEvents(dpRank?: number): KVEvent[] {
    this.ensureOpen();
    if (dpRank !== undefined) checkInt('dpRank', dpRank, 0, this.dpSize - 1);
    return snapshotRanks(this.ranks, this.saltNames, dpRank);
  }

  /** @internal drainEvents as raw records (the wire encoders read them in place). */
  drainEventRecords(visit: (dpRank: number, source: KVEventSource, rt: CoreInstance, ptr: number, len: number) => void): void {
    this.ensureOpen();
    drainRankRecords(this.ranks, visit);
  }

  /** Evicts every cached block no sequence holds, on every rank; returns how many per rank. */
  resetPrefixCache(): number[] {
    this.ensureOpen();
    return this.ranks.map((k) => k.resetPrefixCache());
  }

  /** Pending block copies of beam-search swaps on `dpRank`. */
  swapTransferInfos(dpRank: number): readonly BlockTransferInfo[] {
    this.ensureOpen();
    checkInt('dpRank', dpRank, 0, this.dpSize - 1);
    return this.ranks[dpRank]!.transfers;
  }

  /** Forgets the pending swap copies (the worker did them). */
  resetTransferInfos(): void {
    this.ensureOpen();
    for (const k of this.ranks) k.transfers.length = 0;
  }

  // ---- composite ranks ----

  /** The composite KV manager of `dpRank` (null unless `managerTypes` was given). */
  compositeManager(dpRank: number): CompositeBlockManager | null {
    this.ensureOpen();
    checkInt('dpRank', dpRank, 0, this.dpSize - 1);
    const k = this.ranks[dpRank]!;
    return k instanceof CompositeRank ? k.composite : null;
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
    const s = seq.state;
    return this.ranks[Math.max(0, s.dpRank)]!.prefixHashes(s, nBlocks);
  }

  /**
   * @internal prefixHashes(seq, nBlocks) left in a core's staging memory,
   * `extra` bytes free after them (RankManager.prefixHashesIn); null when
   * the sequence's rank cannot, or nBlocks is 0.
   */
  prefixHashesIn(seq: Sequence, nBlocks: number, extra: number): CoreBytes | null {
    const s = this.own(seq);
    const rank = this.ranks[Math.max(0, s.dpRank)]!;
    if (nBlocks <= 0 || rank.prefixHashesIn === undefined) return null;
    return rank.prefixHashesIn(s, nBlocks, extra);
  }

  /** The linear-state cache of `dpRank` (pools created with `enableLinearState`). */
  linearStateCache(dpRank: number): LinearStatePrefixCache {
    this.ensureOpen();
    checkInt('dpRank', dpRank, 0, this.dpSize - 1);
    return this.requireLinear('linearStateCache', dpRank).cache;
  }

  /**
   * The linear-state cache op of `sequence` for a forward ending at `stepEnd`
   * tokens (marks the sequence initialized). Resolve a batch's ops with
   * `linearStateCache(rank).resolveCacheOps(ops, sequences)`.
   */
  linearStateCacheOp(sequence: Sequence, stepEnd: number): LinearStateCacheOp {
    const s = this.own(sequence);
    this.requireLinear('linearStateCacheOp', 0);
    if (s.dpRank < 0) throw new Error('linearStateCacheOp: the sequence has not been allocated yet');
    const rank = this.ranks[s.dpRank]!;
    return rank.linear!.cacheOp(s, this.blockSize, stepEnd, (n) => rank.prefixHashes(s, n));
  }

  /**
   * Gives back the sequence's live linear-state slot alone (the reference's
   * release of a finished prefill's state); its single id and blocks stay.
   * A later allocation of a sequence that holds no slot takes a new one.
   */
  releaseLinearStateSlot(sequence: Sequence): void {
    const s = this.own(sequence);
    this.requireLinear('releaseLinearStateSlot', 0);
    if (s.dpRank >= 0) this.ranks[s.dpRank]!.linear!.release(s);
  }

  /** Per rank: the cache's figures plus the shared KV blocks trimmed for lack of a checkpoint. */
  linearStateStats(): (LinearStateStats & { trimmedBlocks: number })[] {
    this.ensureOpen();
    return this.ranks.map((k, r) => {
      const l = this.requireLinear('linearStateStats', r);
      return { ...l.cache.stats(), trimmedBlocks: l.trimmedBlocks };
    });
  }

  private requireLinear(what: string, r: number): LinearStateAddOn {
    const l = this.ranks[r]!.linear;
    if (!l) throw new Error(`${what}: this pool was created without enableLinearState`);
    return l;
  }

  // ---- audit ----

  /** Sequences that hold blocks or a single id of this pool. */
  liveSequences(): ReadonlySet<Sequence> {
    this.ensureOpen();
    return this.live;
  }

  check(): void {
    this.ensureOpen();
    const placed: SequenceState[][] = this.ranks.map(() => []);
    for (const seq of this.live) {
      const s = seq.state;
      if (s.owner !== this || s.dpRank < 0 || s.dpRank >= this.dpSize) throw new Error('kvpool: a live sequence is not placed in this pool');
      placed[s.dpRank]!.push(s);
    }
    this.ranks.forEach((k, r) => {
      k.check(placed[r]!, r, this.raw.held[r]!);
      k.linear?.check(placed[r]!, r);
      this.singleIds.check(r, placed[r]!);
    });
  }

  /** Gives every manager's memory back to the core. The pool is unusable afterwards: every call throws. */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const k of this.ranks) k.dispose();
    this.singleIds.dispose();
  }
}
