// Model of BlockManagerPool (bindings/pool/block-manager-pool.ts): it chooses
// each sequence's data-parallel rank, owns single ids, keeps track of the
// sequences holding anything, and hands everything a rank does with blocks
// to that rank's model (model/ranks/). Written for clarity, rule by rule.

import type { ModelBlockManager, ModelManagerStats } from './block-manager-impl.js';
import type { ModelCompositeBlockManager } from './composite-block-manager.js';
import type { ModelLinearStateCache, ModelOp } from './linear-state-prefix-cache.js';
import { parseModelPoolOptions, type ModelPoolConfig, type ModelPoolOptions } from './pool-options.js';
import { modelRetentionRanges } from './prefix-cache.js';
import { modelBuildRank } from './ranks/build-rank.js';
import { ModelCompositeRank } from './ranks/composite-rank.js';
import type { ModelLinearStateAddOn } from './ranks/linear-state-add-on.js';
import type { ModelRankManager, ModelSwap } from './ranks/rank-manager.js';
import { ModelSequence } from './sequence.js';
import { ModelSingleBlockManager } from './single-block-manager.js';
import { modelInt, modelInt32s } from './validate.js';
import type { ModelXTensor } from './xtensor-block-manager-impl.js';

export type { ModelPoolOptions } from './pool-options.js';

/** One rank's figures, as the library's PoolRankStats. */
export interface ModelRankStats extends ModelManagerStats {
  singleBlocksFree: number;
  singleBlocksUsed: number;
  prefixQueryTokens: number;
  prefixHitTokens: number;
  prefixHitRate: number;
}

export class ModelBlockManagerPool {
  readonly blockSize: number;
  readonly numBlocks: number;
  readonly dpSize: number;
  readonly enablePrefixCache: boolean;
  readonly ranks: ModelRankManager[] = [];
  readonly singles: ModelSingleBlockManager[] = [];
  /** Sequences holding anything of this pool. */
  protected readonly live = new Set<ModelSequence>();
  /** Per rank, the references the caller holds on blocks of allocateBlocks (index = id). */
  private readonly raw: number[][] = [];

  constructor(o: ModelPoolOptions, parsed?: ModelPoolConfig) {
    const c = parsed ?? parseModelPoolOptions(o);
    this.blockSize = c.blockSize;
    this.numBlocks = c.numBlocks;
    this.dpSize = c.dpSize;
    this.enablePrefixCache = c.rank.prefixCache;
    for (let r = 0; r < c.dpSize; r++) {
      const rank = modelBuildRank(c.rank, r);
      this.ranks.push(rank);
      this.raw.push(new Array<number>(rank.kv.numBlocks).fill(0));
      this.singles.push(new ModelSingleBlockManager(c.singleBlockCapacity));
    }
  }

  /** Each rank's KV block manager, on pools of plain or composite ranks (a composite: its capacity sub-manager). */
  get managers(): ModelBlockManager[] {
    return this.ranks.map((k, r) => {
      if (k.kind === 'xtensor') throw new Error(`model: rank ${r} keeps its blocks in a ModelXTensor; use kvManager(${r})`);
      return k.kv as ModelBlockManager;
    });
  }

  /** The KV manager of rank `r` (for views and audits, as the library's kvManager). */
  kvManager(r: number): ModelBlockManager | ModelXTensor {
    return this.ranks[modelInt('dpRank', r, 0, this.dpSize - 1)]!.kv;
  }

  /** Keeps every manager's peak figure (a scan per step: for the differential tests). */
  trackPeaks(): void {
    for (const k of this.ranks) k.trackPeaks();
  }

  newSequence(prompt: ArrayLike<number>, salt = ''): ModelSequence {
    return new ModelSequence(prompt, salt);
  }

  /** A sequence placed by another pool cannot be used here (an Error, nothing changes). */
  own(s: ModelSequence): ModelSequence {
    if (!(s instanceof ModelSequence)) throw new TypeError('model: not a sequence');
    if (s.owner !== null && s.owner !== this) throw new Error('model: the sequence belongs to another pool');
    return s;
  }

  /** Most free blocks, lowest rank on ties; with linear state, ranks without a free single id are skipped (rank 0 if none is left). */
  chooseRank(): number {
    let best = 0;
    let bestFree = 0;
    for (let r = 0; r < this.dpSize; r++) {
      if (this.ranks[r]!.linear !== null && this.singles[r]!.numFreeBlocks() === 0) continue;
      const f = this.ranks[r]!.numFreeBlocks();
      if (f > bestFree) {
        best = r;
        bestFree = f;
      }
    }
    return best;
  }

  protected rankFor(s: ModelSequence): number {
    return s.dpRank >= 0 ? s.dpRank : this.chooseRank();
  }

  /** Places `s` on rank `r` for good (even if the allocation then fails). */
  protected placeOn(s: ModelSequence, r: number): void {
    if (s.dpRank >= 0) return;
    s.dpRank = r;
    s.owner = this;
  }

  /**
   * Grows `s` on its rank (tryAllocate: admits its whole prompt), placing it
   * first: a new single id (with its live linear-state slot) is taken for the
   * operation and given back if it fails; the live set follows what it holds.
   */
  private grow(s: ModelSequence, numTokens: number, maxCopy: number, tryAllocate: boolean): boolean {
    const r = this.rankFor(s);
    const rank = this.ranks[r]!;
    const linear = rank.linear;
    this.placeOn(s, r);
    const newSingle = s.singleBlockId < 0;
    if (newSingle && !this.acquireSingle(s, r)) return false;
    // A sequence whose live slot was released alone gets a new one.
    const newSlot = !newSingle && linear !== null && s.linearSlot < 0;
    if (newSlot && !linear.acquire(s)) return false;
    if (tryAllocate ? rank.tryAllocate(s) : rank.allocate(s, numTokens, maxCopy)) {
      this.live.add(s);
      return true;
    }
    if (newSingle) this.releaseSingle(s, r);
    else if (newSlot) linear!.release(s);
    if (!rank.holds(s) && s.singleBlockId < 0) this.live.delete(s);
    return false;
  }

  private acquireSingle(s: ModelSequence, r: number): boolean {
    const got = this.singles[r]!.allocate(1);
    if (got === null) return false;
    s.singleBlockId = got[0]!;
    const linear = this.ranks[r]!.linear;
    if (linear !== null && !linear.acquire(s)) {
      this.singles[r]!.deallocate([s.singleBlockId]);
      s.singleBlockId = -1;
      return false;
    }
    return true;
  }

  private releaseSingle(s: ModelSequence, r: number): void {
    this.ranks[r]!.linear?.release(s);
    this.singles[r]!.deallocate([s.singleBlockId]);
    s.singleBlockId = -1;
  }

  // ---- allocation ----

  /** One sequence (for `numTokens`, all its tokens by default), or a list, in order, stopping at the first that fails. */
  allocate(arg: ModelSequence | ModelSequence[], numTokens?: number): boolean {
    if (Array.isArray(arg)) {
      if (numTokens !== undefined) throw new TypeError('model: numTokens with a list of sequences');
      arg.forEach((s) => this.own(s));
      return arg.every((s) => this.allocateOne(s, s.numTokens, Infinity));
    }
    const s = this.own(arg);
    return this.allocateOne(s, numTokens === undefined ? s.numTokens : modelInt('numTokens', numTokens), Infinity);
  }

  protected allocateOne(s: ModelSequence, numTokens: number, maxCopy: number): boolean {
    this.ranks[this.rankFor(s)]!.precheck(s, numTokens, maxCopy);
    return this.grow(s, numTokens, maxCopy, false);
  }

  tryAllocate(s: ModelSequence): boolean {
    this.own(s);
    return this.grow(s, s.numTokens, Infinity, true);
  }

  allocateShared(s: ModelSequence): number {
    this.own(s);
    const r = this.rankFor(s);
    this.placeOn(s, r);
    this.ranks[r]!.allocateShared(s);
    if (this.ranks[r]!.holds(s)) this.live.add(s);
    return s.sharedBlocks;
  }

  /** The reference's raw allocate: blocks for `numTokens` from the rank a new sequence would go to; null when short. */
  allocateBlocks(numTokens: number): { dpRank: number; blockIds: number[] } | null {
    const n = Math.ceil(modelInt('numTokens', numTokens) / this.blockSize);
    const r = this.chooseRank();
    const ids = this.ranks[r]!.kv.allocate(n);
    if (ids === null) return null;
    for (const id of ids) this.raw[r]![id]!++;
    return { dpRank: r, blockIds: ids };
  }

  /** Gives back blocks allocateBlocks handed out on `dpRank` (only those). */
  deallocateBlocks(dpRank: number, blockIds: ArrayLike<number>): void {
    modelInt('dpRank', dpRank, 0, this.dpSize - 1);
    const ids = modelInt32s('blockIds', blockIds);
    const held = this.raw[dpRank]!;
    const left = new Map<number, number>();
    ids.forEach((id, i) => {
      const h = left.get(id) ?? (id >= 0 && id < held.length ? held[id]! : 0);
      if (h <= 0) throw new RangeError(`model: blockIds[${i}] = ${id} was not handed out by allocateBlocks on rank ${dpRank}`);
      left.set(id, h - 1);
    });
    this.ranks[dpRank]!.kv.deallocate(ids);
    for (const id of ids) held[id]!--;
  }

  /** Raw blocks the caller holds on rank `r`, one entry per reference, ascending. */
  rawBlocks(r: number): number[] {
    return this.raw[r]!.flatMap((n, id) => new Array<number>(n).fill(id));
  }

  /** Sequence.fork: a copy sharing every block, with the same tokens, computed count and rank, and no single id. */
  fork(parent: ModelSequence, swapLastBlock: unknown = false): ModelSequence {
    this.own(parent);
    if (parent.owner === null) throw new Error('model: fork of a sequence no pool has placed');
    if (typeof swapLastBlock !== 'boolean') throw new TypeError('model: swapLastBlock is not a boolean');
    // Its tokens are the beam's already, its table not yet.
    if (parent.beamSource !== null) throw new Error('model: fork of a sequence whose adopted beam is not taken yet');
    const c = new ModelSequence(parent.tokens, parent.salt);
    c.numPromptTokens = parent.numPromptTokens;
    c.retention = parent.retention;
    c.owner = this;
    c.blockTable = [...parent.blockTable];
    c.sharedBlocks = parent.sharedBlocks;
    c.kvCachedTokens = parent.kvCachedTokens;
    c.dpRank = parent.dpRank;
    c.needsSwap = swapLastBlock && parent.blockTable.length > 0;
    const rank = this.ranks[parent.dpRank]!;
    rank.fork(parent, c);
    if (rank.holds(c)) this.live.add(c);
    return c;
  }

  /**
   * Beam search as the reference does it: `child` takes over `source`'s
   * tokens (and which of them are prompt), salt, computed count and blocks (a reference each, now); its own
   * blocks go at its next allocation, which also copies the shared last
   * block first when `swapLastBlock` and no new block is needed.
   */
  adoptBeam(child: ModelSequence, source: ModelSequence, options: { swapLastBlock?: unknown } = {}): void {
    this.own(child);
    this.own(source);
    if (options === null || typeof options !== 'object') throw new TypeError('model: options is not an object');
    const swap = options.swapLastBlock ?? false;
    if (typeof swap !== 'boolean') throw new TypeError('model: swapLastBlock is not a boolean');
    if (child === source) throw new Error('model: a sequence adopting itself');
    if (source.dpRank < 0) throw new Error('model: the source is not placed');
    if (source.beamSource !== null) throw new Error('model: the source adopted a beam not taken yet');
    if (child.dpRank >= 0 && child.dpRank !== source.dpRank) throw new Error('model: child and source on different ranks');
    this.ranks[source.dpRank]!.adoptBeam(child, source, swap);
    this.placeOn(child, source.dpRank);
    child.salt = source.salt;
    child.tokens = [...source.tokens];
    child.numPromptTokens = source.numPromptTokens;
    child.kvCachedTokens = source.kvCachedTokens;
    this.live.add(child);
  }

  // ---- caching and release ----

  cache(s: ModelSequence, numTokens?: number): void {
    this.own(s);
    const avail = numTokens === undefined ? s.kvCachedTokens : Math.min(modelInt('numTokens', numTokens), s.blockTable.length * this.blockSize, s.numTokens);
    if (s.dpRank < 0) return;
    this.ranks[s.dpRank]!.cache(s, avail);
  }

  /** One sequence or a list; caches its computed blocks first unless `cacheFirst` is false. */
  deallocate(arg: ModelSequence | ModelSequence[], cacheFirst = true): void {
    const list = Array.isArray(arg) ? arg : [arg];
    list.forEach((s) => this.own(s));
    for (const s of list) this.release(s, cacheFirst);
  }

  deallocateWithoutCache(s: ModelSequence): void {
    this.release(this.own(s), false);
  }

  protected release(s: ModelSequence, cacheFirst: boolean): void {
    const r = s.dpRank;
    if (r < 0) return;
    this.ranks[r]!.release(s, cacheFirst);
    if (s.singleBlockId >= 0) this.releaseSingle(s, r);
    this.live.delete(s);
  }

  // ---- figures ----

  numFreeBlocks(): number[] {
    return this.ranks.map((k) => k.numFreeBlocks());
  }

  numUsedBlocks(): number[] {
    return this.ranks.map((k) => k.numUsedBlocks());
  }

  numBlocksInPrefixCache(): number[] {
    return this.ranks.map((k) => k.numBlocksInPrefixCache());
  }

  /** Utilization of the rank a new sequence would go to. */
  kvCacheUtilization(): number {
    return this.ranks[this.chooseRank()]!.kvCacheUtilization();
  }

  /** Mean utilization over ranks. */
  gpuCacheUsage(): number {
    return this.ranks.reduce((a, k) => a + k.kvCacheUtilization(), 0) / this.dpSize;
  }

  stats(): ModelRankStats[] {
    return this.ranks.map((k, r) => {
      const st = k.stats();
      return {
        ...st,
        singleBlocksFree: this.singles[r]!.numFreeBlocks(),
        singleBlocksUsed: this.singles[r]!.numUsedBlocks(),
        prefixQueryTokens: st.blocksQueried * this.blockSize,
        prefixHitTokens: st.blocksHit * this.blockSize,
        prefixHitRate: st.blocksQueried > 0 ? st.blocksHit / st.blocksQueried : 0,
      };
    });
  }

  /** Sequence.setRetention: replaces its marks. */
  setRetention(s: ModelSequence, ranges: unknown): void {
    s.retention = modelRetentionRanges(ranges);
  }

  /** The clock of the priority policy, shared by every rank (never backwards). */
  get time(): number {
    return this.ranks[0]!.time();
  }

  setTime(t: number): void {
    if (typeof t !== 'number') throw new TypeError('model: t is not a number');
    if (!(t >= this.time) || t === Infinity) throw new RangeError(`model: t ${t} is not a finite time from ${this.time} on`);
    for (const k of this.ranks) k.setTime(t);
  }

  recordEvents(on: boolean): void {
    if (typeof on !== 'boolean') throw new TypeError('model: on is not a boolean');
    for (const k of this.ranks) k.recordEvents(on);
  }

  resetPrefixCache(): number[] {
    return this.ranks.map((k) => k.resetPrefixCache());
  }

  swapTransferInfos(r: number): ModelSwap[] {
    return this.ranks[modelInt('dpRank', r, 0, this.dpSize - 1)]!.transfers;
  }

  resetTransferInfos(): void {
    for (const k of this.ranks) k.transfers.length = 0;
  }

  // ---- composite ranks ----

  compositeManager(r: number): ModelCompositeBlockManager | null {
    const k = this.ranks[modelInt('dpRank', r, 0, this.dpSize - 1)]!;
    return k instanceof ModelCompositeRank ? k.composite : null;
  }

  // ---- linear state ----

  /** The chain keys at the first `n` block boundaries of `s` (Sequence.prefixHashes). */
  prefixKeys(s: ModelSequence, n: number): string[] {
    return n <= 0 ? [] : this.ranks[Math.max(0, s.dpRank)]!.prefixKeys(s, n);
  }

  /** The linear-state cache of rank `r` (a RangeError for a bad rank, then an Error without linear state). */
  linearStateCache(r: number): ModelLinearStateCache {
    modelInt('dpRank', r, 0, this.dpSize - 1);
    return this.requireLinear(r).cache;
  }

  /** The cache op of `s` for a forward ending at `stepEnd` tokens (marks it initialized). */
  linearStateCacheOp(s: ModelSequence, stepEnd: number): ModelOp {
    this.own(s);
    this.requireLinear(0);
    if (s.dpRank < 0) throw new Error('model: the sequence is not placed');
    const rank = this.ranks[s.dpRank]!;
    return rank.linear!.cacheOp(s, this.blockSize, stepEnd, (n) => rank.prefixKeys(s, n));
  }

  /** Gives back the sequence's live slot alone; its next allocation takes a new one. */
  releaseLinearStateSlot(s: ModelSequence): void {
    this.own(s);
    this.requireLinear(0);
    if (s.dpRank >= 0) this.ranks[s.dpRank]!.linear!.release(s);
  }

  linearStateStats() {
    return this.ranks.map((_, r) => {
      const l = this.requireLinear(r);
      return { ...l.cache.stats(), trimmedBlocks: l.trimmedBlocks };
    });
  }

  private requireLinear(r: number): ModelLinearStateAddOn {
    const l = this.ranks[r]!.linear;
    if (l === null) throw new Error('model: no linear state');
    return l;
  }

  // ---- audit ----

  liveSequences(): ReadonlySet<ModelSequence> {
    return this.live;
  }
}
