// A composite rank (hybrid attention, see docs/composite.md): the rank's KV
// manager is a CompositeBlockManager and a sequence's blocks live in its 2-D
// tables, one per sub-manager. Growth is all or nothing across the
// sub-managers, and window blocks that slid out go back after every growth.
// As in the reference, a composite rank does no prefix caching and no beam
// swaps; its figures come from the capacity sub-manager.

import type { BlockManagerStats } from '../managers/block-manager.js';
import type { CompositeBlockManager } from '../managers/composite-block-manager.js';
import type { KVEventRecordVisitor, KVEventSource, RecordEventsOptions } from '../managers/kv-events.js';
import type { PoolManager } from '../managers/pool-manager.js';
import type { LinearStateAddOn } from './linear-state-add-on.js';
import { hashChainFromTokens } from './prefix-hashes.js';
import type { BlockTransferInfo, RankManager } from './rank-manager.js';
import type { SequenceState } from './sequence-state.js';

export class CompositeRank implements RankManager {
  readonly kind = 'composite' as const;
  readonly blockSize: number;
  readonly prefixCache = false;
  readonly kv: PoolManager;
  readonly transfers: BlockTransferInfo[] = [];
  /** Each sub-manager's group as events name it (vLLM's group_idx and cache spec). */
  private readonly sources: readonly KVEventSource[];

  constructor(
    readonly composite: CompositeBlockManager,
    readonly linear: LinearStateAddOn | null,
    /** The pool's hash seed (linear-state checkpoint keys). */
    private readonly seed: { lo: number; hi: number },
  ) {
    this.blockSize = composite.blockSize;
    this.kv = composite.capacityManager;
    this.sources = composite.specs.map((spec, index) =>
      Object.freeze({
        medium: 'GPU',
        group: Object.freeze(
          spec.kind === 'sliding-window'
            ? { index, kind: 'sliding_window' as const, slidingWindow: composite.slidingWindowSize }
            : { index, kind: 'full_attention' as const, slidingWindow: null },
        ),
      }),
    );
  }

  enter(): void {}

  exit(): void {}

  precheck(): void {}

  /** Every growth may release window blocks: there is no step that needs nothing. */
  fits(): boolean {
    return false;
  }

  allocate(s: SequenceState, numTokens: number): boolean {
    const t = s.composite ?? (s.composite = this.composite.newTables());
    return this.composite.allocateFor(t, numTokens, s.kvCached);
  }

  decodeRoom(s: SequenceState): number {
    return s.composite === null ? 0 : this.composite.decodeRoomFor(s.composite, s.numTokens);
  }

  tryAllocate(s: SequenceState): boolean {
    if (!this.allocate(s, s.numTokens)) return false;
    s.kvCached = s.numTokens;
    return true;
  }

  allocateShared(): void {}

  cache(): void {}

  release(s: SequenceState): void {
    if (s.composite) this.composite.deallocateFor(s.composite);
    s.resetBlocks();
  }

  fork(parent: SequenceState, child: SequenceState): void {
    if (parent.composite) child.composite = this.composite.forkFor(parent.composite);
  }

  adoptBeam(): void {
    throw new TypeError('adoptBeam: composite ranks keep no beam state (as in the reference); fork the sequence instead');
  }

  holds(s: SequenceState): boolean {
    return s.composite !== null && !s.composite.empty;
  }

  prefixHashes(s: SequenceState, nBlocks: number): Uint8Array {
    return hashChainFromTokens(this.composite.capacityManager.rt, s, nBlocks, this.blockSize, this.seed.lo, this.seed.hi);
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
    return this.composite.kvCacheUtilization();
  }

  stats(): BlockManagerStats {
    return this.composite.stats();
  }

  recordEvents(on: boolean, options?: RecordEventsOptions): void {
    for (const m of this.composite.subManagers) m.recordEvents(on, options);
  }

  /** The sub-managers keep no prefix cache today, so they record nothing; their events would say their group. */
  drainEventRecords(visit: KVEventRecordVisitor): void {
    this.composite.subManagers.forEach((m, i) => m.drainEventRecords(this.sources[i]!, visit));
  }

  snapshotEventRecords(visit: KVEventRecordVisitor): void {
    this.composite.subManagers.forEach((m, i) => m.snapshotEventRecords(this.sources[i]!, visit));
  }

  resetPrefixCache(): number {
    return 0;
  }

  time(): number {
    return 0;
  }

  setTime(): void {}

  check(placed: readonly SequenceState[], rank: number, extra: Int32Array): void {
    const m = this.composite;
    m.check();
    const tables = [];
    for (const s of placed) {
      if (s.numBlocks !== 0) throw new Error(`kvpool: rank ${rank}: a sequence on a composite rank holds a plain block table`);
      if (s.composite) tables.push(s.composite);
    }
    m.checkHolders(tables, { index: m.capacityIndex, counts: extra });
  }

  dispose(): void {
    this.composite.dispose();
    this.linear?.dispose();
  }
}
