// Model of the host tier wrapped around a block-table rank
// (bindings/ranks/host-tier-rank.ts, docs/host-tier.md): a host manager with
// its own prefix cache, host block lists per sequence, load plans, offload
// pairs and plans in flight, and prefetches from a KV-cache store. Host hits
// are cut back to checkpointed boundaries as device hits are, and matched
// and cached under the same salted keys.

import { ModelBlockManager, type ModelManagerStats } from '../block-manager-impl.js';
import { blockKey } from '../chain-key.js';
import type { ModelHostBlocks, ModelSequence, ModelTransfer } from '../sequence.js';
import type { ModelBlockTableRank } from './block-table-rank.js';
import type { ModelRankManager } from './rank-manager.js';

export interface ModelOffloadPlan {
  dpRank: number;
  blocks: ModelTransfer[];
}

export interface ModelPrefetchPlan {
  dpRank: number;
  blocks: ModelTransfer[];
}

export interface ModelHierarchyRankStats {
  hostHitBlocks: number;
  blocksLoaded: number;
  blocksOffloaded: number;
  offloadBlocksFailed: number;
  offloadBlocksInFlight: number;
  blocksPrefetched: number;
  blocksFetched: number;
}

export class ModelHostTierRank implements ModelRankManager {
  readonly kind = 'plain' as const;
  readonly blockSize: number;
  readonly prefixCache: boolean;
  readonly counters: ModelHierarchyRankStats = {
    hostHitBlocks: 0, blocksLoaded: 0, blocksOffloaded: 0, offloadBlocksFailed: 0, offloadBlocksInFlight: 0, blocksPrefetched: 0, blocksFetched: 0,
  };
  loads: ModelTransfer[] = [];
  queued: ModelTransfer[] = [];
  readonly inFlight = new Set<ModelOffloadPlan>();

  constructor(
    readonly inner: ModelBlockTableRank,
    readonly host: ModelBlockManager,
    readonly dpRank: number,
  ) {
    this.blockSize = inner.blockSize;
    this.prefixCache = inner.prefixCache;
  }

  get kv(): ModelBlockManager {
    return this.inner.cacheManager;
  }

  get linear() {
    return this.inner.linear;
  }

  get transfers() {
    return this.inner.transfers;
  }

  // ---- allocation: device first, then the host prefix and its load plan ----

  allocate(s: ModelSequence, numTokens: number, maxCopy: number): boolean {
    this.takeBeamHost(s);
    const startedEmpty = s.blockTable.length === 0;
    if (!this.inner.allocate(s, numTokens)) {
      // Short of blocks, the whole sequence is reset, its host state included.
      if (startedEmpty) this.releaseHost(s);
      return false;
    }
    if (this.hostBlocksOf(s) === 0 && this.inPrefill(s)) this.matchHost(s);
    const h = s.host;
    if (h !== null && s.kvCachedTokens < h.kv) this.planLoads(s, h, maxCopy);
    return true;
  }

  tryAllocate(s: ModelSequence): boolean {
    return this.inner.tryAllocate(s);
  }

  allocateShared(s: ModelSequence): void {
    this.inner.allocateShared(s);
    if (this.hostBlocksOf(s) === 0 && this.inPrefill(s)) this.matchHost(s);
  }

  private inPrefill(s: ModelSequence): boolean {
    return this.prefixCache && s.kvCachedTokens < s.numPromptTokens;
  }

  private hostBlocksOf(s: ModelSequence): number {
    return s.host?.table.length ?? 0;
  }

  /** A beam the sequence adopted replaces its own blocks when taken: its host blocks (its own prompt's KV) go with them. */
  private takeBeamHost(s: ModelSequence): void {
    if (s.beamSource !== null) this.releaseHost(s);
  }

  /**
   * Refuses (a RangeError, nothing changed) an allocation whose load plan
   * would write a device block the sequence will not hold: the device and
   * host hits are peeked without trimming, as the allocation would find them.
   */
  precheck(s: ModelSequence, numTokens: number, maxCopy: number): void {
    const B = this.blockSize;
    // A pending beam: the allocation continues on the source's blocks, with no host blocks.
    const h = s.beamSource === null ? s.host : null;
    const held = h?.table.length ?? 0;
    const after = Math.ceil(numTokens / B);
    const hostBound = held > 0 ? h!.kv / B : Math.floor((s.numTokens - 1) / B);
    if (after >= hostBound || maxCopy === 0) return;
    let devHeld = s.beamSource === null ? s.blockTable.length : s.beamSource.table.length;
    let kv = s.kvCachedTokens;
    if (devHeld === 0 && this.prefixCache) {
      let hits = this.kv.peek(s.tokens, s.salt);
      if (hits > 0) {
        if (hits * B === s.numTokens) hits--;
        devHeld = hits;
        kv = hits * B;
      }
    }
    let hostTokens = 0;
    if (held > 0) hostTokens = h!.kv;
    else if (this.prefixCache && kv < s.numPromptTokens) {
      let hits = this.host.peek(s.tokens, s.salt);
      if (hits * B === s.numTokens) hits--;
      hostTokens = Math.max(0, hits) * B;
    }
    if (kv >= hostTokens) return;
    const from = Math.floor(kv / B);
    const end = from + Math.min(maxCopy, hostTokens / B - from);
    if (end > Math.max(devHeld, after)) throw new RangeError(`model: the load plan would write device block ${end - 1}, which the sequence does not hold`);
  }

  /** Attaches the host prefix hits of the prompt (checkpoints and the exact-prompt rule as on the device). */
  private matchHost(s: ModelSequence): void {
    const B = this.blockSize;
    if (Math.floor(s.numTokens / B) === 0) return;
    const table = this.host.allocateShared(s.tokens, [], s.salt);
    let hits = table.length;
    const linear = this.inner.linear;
    if (linear !== null && hits > 0) {
      const keep = linear.keep(this.host, table, s.numTokens, Math.min(Math.floor(s.kvCachedTokens / B), hits), hits);
      if (keep < hits) this.host.deallocate(table.slice(keep));
      hits = keep;
    }
    if (hits > 0 && hits * B === s.numTokens) {
      this.host.deallocate([table[hits - 1]!]);
      hits--;
    }
    this.counters.hostHitBlocks += hits;
    s.host = hits === 0 ? null : { table: table.slice(0, hits), kv: hits * B, prefetch: s.host?.prefetch ?? null };
  }

  /** H2D copies of the host blocks the device has not computed; advances the device's count. */
  private planLoads(s: ModelSequence, h: ModelHostBlocks, maxCopy: number): void {
    const B = this.blockSize;
    const from = Math.floor(s.kvCachedTokens / B);
    const copied = Math.min(maxCopy, h.kv / B - from);
    for (let i = from; i < from + copied; i++) this.loads.push({ src: h.table[i]!, dst: s.blockTable[i]!, key: this.host.stamp.get(h.table[i]!)! });
    this.counters.blocksLoaded += copied;
    s.kvCachedTokens = (from + copied) * B;
  }

  // ---- release: cache, offload what only this sequence computed, give back ----

  cache(s: ModelSequence, numTokens: number): void {
    this.takeBeamHost(s);
    this.inner.cache(s, numTokens);
  }

  release(s: ModelSequence, cacheFirst: boolean): void {
    this.takeBeamHost(s);
    if (cacheFirst) {
      this.inner.cache(s, s.kvCachedTokens);
      if (this.hostBlocksOf(s) < s.blockTable.length) this.queueOffload(s);
    }
    this.releaseHost(s);
    this.inner.release(s, false);
  }

  private releaseHost(s: ModelSequence): void {
    if (s.host === null) return;
    this.host.deallocate(s.host.table);
    s.host = null;
  }

  /**
   * Pairs the computed full blocks that only this sequence and the device
   * cache hold, from the first one the host lacks, with host blocks
   * (allocated here; a host short of blocks offloads nothing new).
   */
  private queueOffload(s: ModelSequence): void {
    const B = this.blockSize;
    const dev = this.kv;
    const cachedDev = Math.floor(s.kvCachedTokens / B);
    const cachedHost = s.host === null ? 0 : Math.floor(s.host.kv / B);
    const heldHost = this.hostBlocksOf(s);
    if (cachedDev > heldHost) {
      const got = this.host.allocate(cachedDev - heldHost);
      if (got !== null) s.host = { table: [...(s.host?.table ?? []), ...got], kv: s.host?.kv ?? 0, prefetch: s.host?.prefetch ?? null };
    }
    const h = s.host;
    if (h === null) return;
    const end = Math.min(cachedDev, h.table.length, s.blockTable.length);
    const moved = new Set<number>();
    for (let i = cachedHost; i < end; i++) {
      const d = s.blockTable[i]!;
      if (dev.ref[d] === 2 && dev.isCached(d)) {
        this.queued.push({ src: d, dst: h.table[i]!, key: dev.prefix.keyOf.get(d)! });
        moved.add(i);
      }
    }
    if (moved.size === 0) return;
    s.blockTable = s.blockTable.filter((_, i) => !moved.has(i));
    s.sharedBlocks = Math.min(s.sharedBlocks, s.blockTable.length);
    h.table = h.table.filter((_, i) => !moved.has(i));
    this.counters.blocksOffloaded += moved.size;
    this.counters.offloadBlocksInFlight += moved.size;
  }

  // ---- the KV-cache store ----

  /**
   * Prefetch from the store: the host prefix hits first (if the sequence has
   * none), then host blocks for every block after them; the plan asks the
   * store for all but the last. Null when there is nothing to fetch or the
   * host is short (the host hits stay).
   */
  prefetch(s: ModelSequence): ModelPrefetchPlan | null {
    if (s.host?.prefetch) throw new Error('model: a prefetch of this sequence is pending');
    if (s.host === null && this.inPrefill(s)) this.matchHost(s);
    const B = this.blockSize;
    const prior = s.host;
    const shared = prior === null ? 0 : prior.kv / B;
    if (prior !== null && prior.table.length > shared) throw new Error('model: the sequence holds host blocks past its host prefix');
    const additional = Math.ceil(s.numTokens / B) - shared;
    if (additional <= 1) return null;
    const got = this.host.allocate(additional);
    if (got === null) return null;
    const h: ModelHostBlocks = prior ?? { table: [], kv: 0, prefetch: null };
    h.table.push(...got);
    s.host = h;
    // Keys chained on the host prefix's last key (or, from block 0, on the salt).
    let parent = shared > 0 ? this.host.stamp.get(h.table[shared - 1]!)! : null;
    const blocks: ModelTransfer[] = [];
    for (let i = 0; i < additional - 1; i++) {
      parent = blockKey(parent, s.tokens, shared + i, B, s.salt);
      blocks.push({ src: -1, dst: h.table[shared + i]!, key: parent });
    }
    h.prefetch = blocks;
    this.counters.blocksPrefetched += blocks.length;
    return { dpRank: this.dpRank, blocks };
  }

  /** The store delivered the first `success` blocks of the pending prefetch: they join the host prefix and cache. */
  updatePrefetch(s: ModelSequence, success: number): number {
    const h = s.host;
    const plan = h?.prefetch;
    if (!h || !plan) throw new Error('model: no prefetch of this sequence is pending');
    const n = Math.min(success, plan.length);
    if (n > 0) this.host.cacheByKeys(plan.slice(0, n).map((b) => b.dst), plan.slice(0, n).map((b) => b.key));
    h.kv += n * this.blockSize;
    h.prefetch = null;
    this.counters.blocksFetched += n;
    return n;
  }

  // ---- transfers ----

  takeTransfers(): { loads: ModelTransfer[]; offload: ModelOffloadPlan | null } {
    let offload: ModelOffloadPlan | null = null;
    if (this.queued.length > 0) {
      offload = { dpRank: this.dpRank, blocks: this.queued };
      this.inFlight.add(offload);
      this.queued = [];
    }
    const loads = this.loads;
    this.loads = [];
    return { loads, offload };
  }

  hasPendingTransfers(): boolean {
    return this.loads.length > 0 || this.queued.length > 0;
  }

  /** Finishes an offload plan: the host blocks are cached under their keys when it succeeded; both sides let go. */
  completeOffload(plan: ModelOffloadPlan, ok: boolean): void {
    const dst = plan.blocks.map((b) => b.dst);
    if (ok) this.host.cacheByKeys(dst, plan.blocks.map((b) => b.key));
    this.kv.deallocate(plan.blocks.map((b) => b.src));
    this.host.deallocate(dst);
    this.inFlight.delete(plan);
    this.counters.offloadBlocksInFlight -= plan.blocks.length;
    if (!ok) this.counters.offloadBlocksFailed += plan.blocks.length;
  }

  // ---- everything else is the device's ----

  /** A fork shares its parent's device blocks, none of its host blocks. */
  fork(parent: ModelSequence): void {
    this.inner.fork(parent);
  }

  adoptBeam(child: ModelSequence, source: ModelSequence, swap: boolean): void {
    this.inner.adoptBeam(child, source, swap);
  }

  holds(s: ModelSequence): boolean {
    return this.inner.holds(s) || s.host !== null;
  }

  prefixKeys(s: ModelSequence, n: number): string[] {
    return this.inner.prefixKeys(s, n);
  }

  numFreeBlocks(): number {
    return this.inner.numFreeBlocks();
  }

  numUsedBlocks(): number {
    return this.inner.numUsedBlocks();
  }

  numBlocksInPrefixCache(): number {
    return this.inner.numBlocksInPrefixCache();
  }

  kvCacheUtilization(): number {
    return this.inner.kvCacheUtilization();
  }

  stats(): ModelManagerStats {
    return this.inner.stats();
  }

  recordEvents(on: boolean): void {
    this.inner.recordEvents(on);
  }

  resetPrefixCache(): number {
    return this.inner.resetPrefixCache();
  }

  time(): number {
    return this.inner.time();
  }

  setTime(t: number): void {
    this.inner.setTime(t);
    this.host.setTime(t);
  }

  trackPeaks(): void {
    this.inner.trackPeaks();
    this.host.trackPeak = true;
  }
}
