// HierarchyBlockManagerPool: a BlockManagerPool whose every rank is wrapped
// in a host tier (ranks/host-tier-rank.ts, docs/host-tier.md). This class only
// adds the host tier's own calls: chunked loads, the transfers a worker must
// do, and the host figures; allocation, caching and release are the pool's.

import { loadCore } from '../core/plain-core.js';
import type { BlockManagerStats } from '../managers/block-manager.js';
import type { BlockManagerImpl } from '../managers/block-manager-impl.js';
import { ConcurrentBlockManagerImpl } from '../managers/concurrent-block-manager-impl.js';
import type { HierarchyRankStats, HostTierRank, OffloadPlan, PrefetchPlan, RankTransfers } from '../ranks/host-tier-rank.js';
import { checkBool, checkInt, checkObject, checkOptionalFunction, describe } from '../validate.js';
import { BlockManagerPool } from './block-manager-pool.js';
import { parsePoolOptions, type BlockManagerPoolOptions, type PoolConfig } from './pool-options.js';
import type { Sequence } from './sequence.js';

export type { BlockTransfer, HierarchyRankStats, OffloadPlan, PrefetchPlan, RankTransfers } from '../ranks/host-tier-rank.js';

export interface HierarchyBlockManagerPoolOptions extends BlockManagerPoolOptions {
  /** Host blocks per dp rank, padding id 0 included (>= 2). */
  hostNumBlocks: number;
}

function parse(o: HierarchyBlockManagerPoolOptions): PoolConfig {
  checkObject('options', o);
  const hostNumBlocks = checkInt('options.hostNumBlocks', (o as { hostNumBlocks?: unknown }).hostNumBlocks, 2);
  return parsePoolOptions(o, hostNumBlocks, ['hostNumBlocks']);
}

export class HierarchyBlockManagerPool extends BlockManagerPool {
  /** Host blocks per dp rank, padding included. */
  readonly hostNumBlocks: number;
  /** A KV-cache store shares the managers (enableKvcacheStore): prefetches from it are allowed. */
  private readonly kvcacheStore: boolean;

  constructor(options: HierarchyBlockManagerPoolOptions, /** @internal */ parsed?: PoolConfig) {
    const o = parsed ?? parse(options);
    super(options, o);
    this.hostNumBlocks = o.rank.hostNumBlocks!;
    this.kvcacheStore = options.enableKvcacheStore === true;
  }

  static override async create(options: HierarchyBlockManagerPoolOptions): Promise<HierarchyBlockManagerPool> {
    const o = parse(options);
    await loadCore();
    if (o.rank.concurrent) await ConcurrentBlockManagerImpl.ready();
    return new HierarchyBlockManagerPool(options, o);
  }

  /** The host-tier ranks (every rank of this pool is one). */
  private get tiers(): HostTierRank[] {
    return this.ranks as unknown as HostTierRank[];
  }

  /** @internal one host block manager per dp rank */
  get hosts(): BlockManagerImpl[] {
    return this.tiers.map((t) => t.host);
  }

  /**
   * `allocate(seq, numTokens)` copying at most `maxCopyBlocks` host blocks in
   * this step (chunked prefill); the device's computed-token count advances
   * to the end of the blocks copied, and the next call continues.
   */
  allocateChunked(sequence: Sequence, numTokens: number, maxCopyBlocks: number): boolean {
    const s = this.own(sequence);
    const n = checkInt('numTokens', numTokens);
    const k = checkInt('maxCopyBlocks', maxCopyBlocks);
    return this.allocateOne(sequence, s, n, k);
  }

  // ---- the KV-cache store ----

  /**
   * The reference's prefetch_from_storage (pools with enableKvcacheStore):
   * attaches the host prefix hits of `sequence` (placing it), takes host
   * blocks for the rest of its blocks, and returns the store-to-host copies
   * to make (every block but the last, partial one), or null when there is
   * nothing to fetch or the host is short. Report what the store delivered
   * with `updatePrefetchResult` before the sequence's next allocation.
   */
  prefetchFromStorage(sequence: Sequence): PrefetchPlan | null {
    const s = this.own(sequence);
    if (!this.kvcacheStore) throw new TypeError('prefetchFromStorage: the pool was created without enableKvcacheStore');
    const r = this.rankFor(s);
    const t = this.tiers[r]!;
    t.enter();
    try {
      this.placeOn(s, r);
      const plan = t.prefetch(s);
      if (t.holds(s)) this.live.add(sequence);
      return plan;
    } finally {
      t.exit();
    }
  }

  /**
   * What the store delivered for the pending prefetch of `sequence`: the
   * count of leading blocks each worker copied (the least counts), or one
   * count. The host prefix grows by them and they enter the host cache.
   * Returns the blocks taken.
   */
  updatePrefetchResult(sequence: Sequence, successCounts: number | readonly number[]): number {
    const s = this.own(sequence);
    if (!this.kvcacheStore) throw new TypeError('updatePrefetchResult: the pool was created without enableKvcacheStore');
    const counts = typeof successCounts === 'number' ? [successCounts] : successCounts;
    if (!Array.isArray(counts) || counts.length === 0) throw new TypeError(`successCounts must be a count or a non-empty array of counts, got ${describe(successCounts)}`);
    counts.forEach((c, i) => checkInt(`successCounts[${i}]`, c));
    if (s.dpRank < 0) throw new Error('updatePrefetchResult: no prefetch of this sequence is pending');
    return this.tiers[s.dpRank]!.updatePrefetch(s, Math.min(...counts));
  }

  // ---- transfers ----

  /**
   * Hands the pending copies to the caller, per rank: the load plans made
   * since the last call, and the queued offload pairs as one plan (which stays
   * in flight, its blocks held, until `completeOffload`).
   */
  takeTransfers(): RankTransfers[] {
    this.ensureOpen();
    return this.tiers.map((t) => t.takeTransfers());
  }

  /** True when a load plan or an offload pair waits for `takeTransfers` (cheap; nothing allocated). */
  hasPendingTransfers(): boolean {
    this.ensureOpen();
    const tiers = this.tiers;
    for (let r = 0; r < tiers.length; r++) if (tiers[r]!.hasPendingTransfers()) return true;
    return false;
  }

  /**
   * Finishes an offload plan: the device blocks are given back (they stay in
   * the device cache), and when `ok` the host blocks are cached under their
   * hashes; a failed copy (`ok` false) gives the host blocks back uncached.
   */
  completeOffload(plan: OffloadPlan, ok = true): void {
    this.ensureOpen();
    checkObject('plan', plan);
    checkBool('ok', ok);
    const t = this.tiers[plan.dpRank];
    if (t === undefined || !t.inFlight.has(plan)) {
      throw new Error(`plan is not an offload plan in flight in this pool (already completed, or not from takeTransfers): ${describe(plan)}`);
    }
    t.completeOffload(plan, ok);
  }

  /**
   * Does every pending copy now, as a worker that finishes the moment it is
   * asked and never fails: the load plans made since the last take are
   * dropped (their copies count as done), and the queued offload pairs of
   * each rank complete as if taken with `takeTransfers` and passed to
   * `completeOffload(plan, true)`, with no plan objects made. Plans taken
   * before stay in flight. `onOffload`, when given, is called for each rank
   * with offloaded blocks before they complete: `hashes` holds their 16-byte
   * chain hashes in plan order (a view, valid during the call; what a store
   * behind the host would write). Returns the blocks offloaded, summed over
   * ranks.
   *
   * ```ts
   * pool.deallocate(seq); // queues the offload of seq's computed blocks
   * pool.completeTransfersNow(); // the host now caches them
   * pool.completeTransfersNow((rank, hashes) => store.writeAll(hashes)); // the same, seeing the hashes
   * ```
   */
  completeTransfersNow(onOffload?: (dpRank: number, hashes: Uint8Array) => void): number {
    this.ensureOpen();
    checkOptionalFunction('onOffload', onOffload);
    let n = 0;
    for (const t of this.tiers) n += t.completeTransfersNow(onOffload);
    return n;
  }

  /**
   * @internal From now on, a deallocate whose rank has nothing queued
   * completes its offload at once, in one core call, as completeTransfersNow()
   * right after it would: for a caller that completes every transfer as soon
   * as it is made and reads no plan (the replay). While the rank records
   * events its offloads queue as before, for that caller to complete.
   */
  completeOffloadsAtRelease(): void {
    this.ensureOpen();
    for (const t of this.tiers) t.completeAtRelease = true;
  }

  /** Offload plans taken and not completed yet. */
  offloadsInFlight(): readonly OffloadPlan[] {
    this.ensureOpen();
    return this.tiers.flatMap((t) => [...t.inFlight]);
  }

  // ---- per-sequence host view ----

  /** The sequence's host block ids in logical order (a copy). */
  hostBlockTable(sequence: Sequence): Int32Array {
    const h = this.own(sequence).host;
    return h === null ? new Int32Array(0) : h.table.slice(0, h.numBlocks);
  }

  /** Prompt tokens whose KV the host tier holds for the sequence. */
  hostKvCachedTokens(sequence: Sequence): number {
    return this.own(sequence).host?.kvTokens ?? 0;
  }

  // ---- figures ----

  hostNumFreeBlocks(): number[] {
    this.ensureOpen();
    return this.tiers.map((t) => t.host.numFreeBlocks());
  }

  hostNumUsedBlocks(): number[] {
    this.ensureOpen();
    return this.tiers.map((t) => t.host.numUsedBlocks());
  }

  hostNumBlocksInPrefixCache(): number[] {
    this.ensureOpen();
    return this.tiers.map((t) => t.host.numBlocksInPrefixCache());
  }

  hostStats(): BlockManagerStats[] {
    this.ensureOpen();
    return this.tiers.map((t) => t.host.stats());
  }

  hierarchyStats(): HierarchyRankStats[] {
    this.ensureOpen();
    return this.tiers.map((t) => ({ ...t.counters }));
  }
}
