// Model of a composite rank (bindings/ranks/composite-rank.ts,
// docs/composite.md): a sequence's blocks live in one table per sub-manager,
// growth is all or nothing across them, and window blocks that slid out go
// back after every growth. No prefix cache, no beam swaps; figures come
// from the capacity sub-manager.

import type { ModelBlockManager, ModelManagerStats } from '../block-manager-impl.js';
import type { ModelCompositeBlockManager } from '../composite-block-manager.js';
import type { ModelSequence } from '../sequence.js';
import type { ModelLinearStateAddOn } from './linear-state-add-on.js';
import { modelPrefixKeys } from './prefix-keys.js';
import type { ModelRankManager, ModelSwap } from './rank-manager.js';

export class ModelCompositeRank implements ModelRankManager {
  readonly kind = 'composite' as const;
  readonly prefixCache = false;
  readonly blockSize: number;
  readonly transfers: ModelSwap[] = [];

  constructor(
    readonly composite: ModelCompositeBlockManager,
    readonly linear: ModelLinearStateAddOn | null,
  ) {
    this.blockSize = composite.blockSize;
  }

  get kv(): ModelBlockManager {
    return this.composite.subs[this.composite.capacityIndex]!;
  }

  precheck(): void {}

  allocate(s: ModelSequence, numTokens: number): boolean {
    const t = s.tables ?? (s.tables = this.composite.newTables());
    return this.composite.allocate(t, numTokens, s.kvCachedTokens);
  }

  tryAllocate(s: ModelSequence): boolean {
    if (!this.allocate(s, s.numTokens)) return false;
    s.kvCachedTokens = s.numTokens;
    return true;
  }

  allocateShared(): void {}

  cache(): void {}

  release(s: ModelSequence): void {
    if (s.tables !== null) this.composite.deallocate(s.tables);
    s.reset();
  }

  fork(parent: ModelSequence, child: ModelSequence): void {
    if (parent.tables !== null) child.tables = this.composite.fork(parent.tables);
  }

  adoptBeam(): void {
    throw new TypeError('model: composite ranks keep no beam state');
  }

  /** True when some table still holds a block (positions that slid out hold none). */
  holds(s: ModelSequence): boolean {
    return s.tables !== null && s.tables.some((t) => t.some((id) => id !== -1));
  }

  prefixKeys(s: ModelSequence, n: number): string[] {
    return modelPrefixKeys(null, s, n, this.blockSize);
  }

  numFreeBlocks(): number {
    return this.composite.numFreeBlocks();
  }

  numUsedBlocks(): number {
    return this.composite.numUsedBlocks();
  }

  numBlocksInPrefixCache(): number {
    return 0;
  }

  kvCacheUtilization(): number {
    return this.kv.kvCacheUtilization();
  }

  stats(): ModelManagerStats {
    return this.kv.stats();
  }

  recordEvents(): void {}

  resetPrefixCache(): number {
    return 0;
  }

  time(): number {
    return 0;
  }

  setTime(): void {}

  trackPeaks(): void {
    for (const m of this.composite.subs) m.trackPeak = true;
  }
}
