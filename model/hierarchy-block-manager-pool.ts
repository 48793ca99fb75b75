// Model of HierarchyBlockManagerPool (bindings/pool/hierarchy-block-manager-pool.ts):
// the model pool with every rank wrapped in a host tier
// (model/ranks/host-tier-rank.ts). This class only adds the host tier's own
// calls: chunked loads, the KV-cache store's prefetches, the transfers a
// worker must do, and the host figures.

import { ModelBlockManagerPool } from './block-manager-pool.js';
import type { ModelBlockManager, ModelManagerStats } from './block-manager-impl.js';
import { parseModelPoolOptions, type ModelPoolOptions } from './pool-options.js';
import type { ModelHierarchyRankStats, ModelHostTierRank, ModelOffloadPlan, ModelPrefetchPlan } from './ranks/host-tier-rank.js';
import type { ModelSequence, ModelTransfer } from './sequence.js';
import { modelInt } from './validate.js';

export type { ModelOffloadPlan, ModelPrefetchPlan } from './ranks/host-tier-rank.js';
export type { ModelTransfer } from './sequence.js';

export class ModelHierarchyPool extends ModelBlockManagerPool {
  readonly hostNumBlocks: number;
  /** A KV-cache store shares the managers (enableKvcacheStore): prefetches are allowed. */
  private readonly kvcacheStore: boolean;

  constructor(o: ModelPoolOptions & { hostNumBlocks: number }) {
    if (o === null || typeof o !== 'object') throw new TypeError('model: options is not an object');
    const c = parseModelPoolOptions(o, modelInt('hostNumBlocks', o.hostNumBlocks, 2), ['hostNumBlocks']);
    super(o, c);
    this.hostNumBlocks = o.hostNumBlocks;
    this.kvcacheStore = c.kvcacheStore;
  }

  private get tiers(): ModelHostTierRank[] {
    return this.ranks as ModelHostTierRank[];
  }

  /** The host block manager of every rank. */
  get hosts(): ModelBlockManager[] {
    return this.tiers.map((t) => t.host);
  }

  /** allocate(s, numTokens) copying at most `maxCopyBlocks` host blocks in this step (chunked prefill). */
  allocateChunked(s: ModelSequence, numTokens: number, maxCopyBlocks: number): boolean {
    this.own(s);
    const n = modelInt('numTokens', numTokens);
    const k = modelInt('maxCopyBlocks', maxCopyBlocks);
    return this.allocateOne(s, n, k);
  }

  /** The reference's prefetch_from_storage (pools with enableKvcacheStore). */
  prefetchFromStorage(s: ModelSequence): ModelPrefetchPlan | null {
    this.own(s);
    if (!this.kvcacheStore) throw new TypeError('model: the pool has no KV-cache store');
    const r = this.rankFor(s);
    this.placeOn(s, r);
    const plan = this.tiers[r]!.prefetch(s);
    if (this.tiers[r]!.holds(s)) this.live.add(s);
    return plan;
  }

  /** What the store delivered for the pending prefetch of `s` (the least of the workers' counts). */
  updatePrefetchResult(s: ModelSequence, successCounts: number | readonly number[]): number {
    this.own(s);
    const counts = typeof successCounts === 'number' ? [successCounts] : successCounts;
    if (!Array.isArray(counts) || counts.length === 0) throw new TypeError('model: successCounts is not a count or a non-empty array');
    counts.forEach((c, i) => modelInt(`successCounts[${i}]`, c));
    if (s.dpRank < 0) throw new Error('model: no prefetch of this sequence is pending');
    return this.tiers[s.dpRank]!.updatePrefetch(s, Math.min(...counts));
  }

  takeTransfers(): Array<{ loads: ModelTransfer[]; offload: ModelOffloadPlan | null }> {
    return this.tiers.map((t) => t.takeTransfers());
  }

  hasPendingTransfers(): boolean {
    return this.tiers.some((t) => t.hasPendingTransfers());
  }

  completeOffload(plan: ModelOffloadPlan, ok: unknown = true): void {
    if (plan === null || typeof plan !== 'object') throw new TypeError('model: plan is not an object');
    if (typeof ok !== 'boolean') throw new TypeError('model: ok is not a boolean');
    const t = this.tiers[plan.dpRank];
    if (t === undefined || !t.inFlight.has(plan)) throw new Error('model: not an offload plan in flight');
    t.completeOffload(plan, ok);
  }

  offloadsInFlight(): ModelOffloadPlan[] {
    return this.tiers.flatMap((t) => [...t.inFlight]);
  }

  hostBlockTable(s: ModelSequence): number[] {
    return [...(this.own(s).host?.table ?? [])];
  }

  hostKvCachedTokens(s: ModelSequence): number {
    return this.own(s).host?.kv ?? 0;
  }

  hostNumFreeBlocks(): number[] {
    return this.tiers.map((t) => t.host.numFreeBlocks());
  }

  hostNumUsedBlocks(): number[] {
    return this.tiers.map((t) => t.host.numUsedBlocks());
  }

  hostNumBlocksInPrefixCache(): number[] {
    return this.tiers.map((t) => t.host.numBlocksInPrefixCache());
  }

  hostStats(): ModelManagerStats[] {
    return this.tiers.map((t) => t.host.stats());
  }

  hierarchyStats(): ModelHierarchyRankStats[] {
    return this.tiers.map((t) => ({ ...t.counters }));
  }
}
