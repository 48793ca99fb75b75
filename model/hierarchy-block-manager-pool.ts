// Model of HierarchyBlockManagerPool (docs/host-tier.md) over the model pool:
// a host manager per rank, host block lists per sequence, load plans, offload
// pairs and plans in flight. Mirrors bindings/pool/hierarchy-block-manager-pool.ts
// rule by rule, written for clarity.

import { ModelBlockManager } from './block-manager-impl.js';
import { ModelBlockManagerPool, type ModelPoolOptions } from './block-manager-pool.js';
import type { ModelSequence } from './sequence.js';

export interface ModelTransfer {
  src: number;
  dst: number;
  key: string;
}

export interface ModelOffloadPlan {
  dpRank: number;
  blocks: ModelTransfer[];
}

export class ModelHierarchyPool extends ModelBlockManagerPool {
  readonly hosts: ModelBlockManager[] = [];
  readonly hostOf = new Map<ModelSequence, { table: number[]; kv: number }>();
  loads: ModelTransfer[][] = [];
  queued: ModelTransfer[][] = [];
  readonly inFlight = new Set<ModelOffloadPlan>();
  readonly counters = { hostHitBlocks: 0, blocksLoaded: 0, blocksOffloaded: 0 };

  constructor(o: ModelPoolOptions & { hostNumBlocks: number }) {
    super(o);
    for (let r = 0; r < this.dpSize; r++) {
      this.hosts.push(new ModelBlockManager({ numBlocks: o.hostNumBlocks, blockSize: o.blockSize, enablePrefixCache: this.prefixOn }));
      this.loads.push([]);
      this.queued.push([]);
    }
  }

  private hostLen(s: ModelSequence): number {
    return this.hostOf.get(s)?.table.length ?? 0;
  }

  private inPrefill(s: ModelSequence): boolean {
    return this.prefixOn && s.kvCachedTokens < s.numPromptTokens;
  }

  /** Host hits of the prompt after the exact-prompt rule. */
  private hostHits(s: ModelSequence, m: ModelBlockManager): number {
    const hits = m.peek(s.tokens);
    return hits > 0 && hits * this.blockSize === s.numTokens ? hits - 1 : hits;
  }

  override allocate(s: ModelSequence, numTokens = s.numTokens, maxCopy = Infinity): boolean {
    const B = this.blockSize;
    // Precondition: the load plan must only write blocks the device will hold.
    let r = s.dpRank;
    if (r < 0) {
      r = 0;
      for (let i = 1; i < this.dpSize; i++) if (this.managers[i]!.numFreeBlocks() > this.managers[r]!.numFreeBlocks()) r = i;
    }
    let devHeld = s.blockTable.length;
    let kv = s.kvCachedTokens;
    if (devHeld === 0 && this.prefixOn) {
      const hits = this.hostHits(s, this.managers[r]!); // same rule on the device
      if (this.managers[r]!.peek(s.tokens) > 0) {
        devHeld = hits;
        kv = hits * B;
      }
    }
    const h0 = this.hostOf.get(s);
    let hostTokens = 0;
    if (h0 && h0.table.length > 0) hostTokens = h0.kv;
    else if (this.prefixOn && kv < s.numPromptTokens) hostTokens = this.hostHits(s, this.hosts[r]!) * B;
    if (kv < hostTokens) {
      const from = Math.floor(kv / B);
      const end = from + Math.min(maxCopy, hostTokens / B - from);
      if (end > Math.max(devHeld, Math.ceil(numTokens / B))) throw new RangeError('load plan beyond the device blocks');
    }

    const startedEmpty = s.blockTable.length === 0;
    const noSingle = s.singleBlockId < 0 && this.singles[r]!.numFreeBlocks() === 0;
    if (!super.allocate(s, numTokens)) {
      if (startedEmpty && !noSingle) this.releaseHost(s); // a block shortage resets the sequence
      return false;
    }
    r = s.dpRank;
    if (this.hostLen(s) === 0 && this.inPrefill(s)) this.matchHost(s, r);
    const h = this.hostOf.get(s);
    if (h && s.kvCachedTokens < h.kv) {
      const from = Math.floor(s.kvCachedTokens / B);
      const copied = Math.min(maxCopy, h.kv / B - from);
      for (let i = from; i < from + copied; i++) {
        this.loads[r]!.push({ src: h.table[i]!, dst: s.blockTable[i]!, key: this.hosts[r]!.stamp.get(h.table[i]!)! });
      }
      this.counters.blocksLoaded += copied;
      s.kvCachedTokens = (from + copied) * B;
    }
    return true;
  }

  override allocateShared(s: ModelSequence): number {
    const shared = super.allocateShared(s);
    if (this.hostLen(s) === 0 && this.inPrefill(s)) this.matchHost(s, s.dpRank);
    return shared;
  }

  private matchHost(s: ModelSequence, r: number): void {
    const host = this.hosts[r]!;
    let hits = host.allocateShared(s.tokens);
    if (hits.length > 0 && hits.length * this.blockSize === s.numTokens) {
      host.deallocate([hits[hits.length - 1]!]);
      hits = hits.slice(0, -1);
    }
    if (hits.length > 0) this.hostOf.set(s, { table: hits, kv: hits.length * this.blockSize });
    this.counters.hostHitBlocks += hits.length;
  }

  private releaseHost(s: ModelSequence): void {
    const h = this.hostOf.get(s);
    if (!h) return;
    this.hosts[s.dpRank]!.deallocate(h.table);
    this.hostOf.delete(s);
  }

  override deallocate(s: ModelSequence, cacheFirst = true): void {
    const r = s.dpRank;
    if (r < 0) return;
    if (cacheFirst) {
      this.cache(s);
      if (this.hostLen(s) < s.blockTable.length) this.offload(s, r);
    }
    this.releaseHost(s);
    super.deallocate(s, false);
  }

  private offload(s: ModelSequence, r: number): void {
    const B = this.blockSize;
    const dev = this.managers[r]!;
    const host = this.hosts[r]!;
    const h = this.hostOf.get(s) ?? { table: [], kv: 0 };
    const cachedDev = Math.floor(s.kvCachedTokens / B);
    const cachedHost = Math.floor(h.kv / B);
    if (cachedDev > h.table.length) {
      const got = host.allocate(cachedDev - h.table.length);
      if (got) h.table.push(...got);
    }
    if (h.table.length > 0) this.hostOf.set(s, h);
    const end = Math.min(cachedDev, h.table.length, s.blockTable.length);
    const movedIdx = new Set<number>();
    for (let i = cachedHost; i < end; i++) {
      const d = s.blockTable[i]!;
      if (dev.ref[d] === 2 && dev.isCached(d)) {
        this.queued[r]!.push({ src: d, dst: h.table[i]!, key: dev.prefix.keyOf.get(d)! });
        movedIdx.add(i);
        this.counters.blocksOffloaded++;
      }
    }
    s.blockTable = s.blockTable.filter((_, i) => !movedIdx.has(i));
    s.sharedBlocks = Math.min(s.sharedBlocks, s.blockTable.length);
    h.table = h.table.filter((_, i) => !movedIdx.has(i));
  }

  takeTransfers(): Array<{ loads: ModelTransfer[]; offload: ModelOffloadPlan | null }> {
    const out = [];
    for (let r = 0; r < this.dpSize; r++) {
      let offload: ModelOffloadPlan | null = null;
      if (this.queued[r]!.length > 0) {
        offload = { dpRank: r, blocks: this.queued[r]! };
        this.inFlight.add(offload);
      }
      out.push({ loads: this.loads[r]!, offload });
      this.loads[r] = [];
      this.queued[r] = [];
    }
    return out;
  }

  completeOffload(plan: ModelOffloadPlan, ok = true): void {
    if (!this.inFlight.has(plan)) throw new Error('not in flight');
    const src = plan.blocks.map((b) => b.src);
    const dst = plan.blocks.map((b) => b.dst);
    const host = this.hosts[plan.dpRank]!;
    if (ok) host.cacheByKeys(dst, plan.blocks.map((b) => b.key));
    this.managers[plan.dpRank]!.deallocate(src);
    host.deallocate(dst);
    this.inFlight.delete(plan);
  }
}
