// The replay loop's view of a model pool of composite ranks (test glue): the
// block table the kernel sees is the capacity sub-manager's, as in
// bindings/replay/composite-replay.ts.

import type { ReplaySequence, ReplayTarget } from '../../bindings/replay/kernel.js';
import type { ModelBlockManagerPool } from '../../model/block-manager-pool.js';
import type { ModelCompositeBlockManager } from '../../model/composite-block-manager.js';
import type { ModelSequence } from '../../model/sequence.js';

class View implements ReplaySequence {
  constructor(
    readonly seq: ModelSequence,
    private readonly table: number,
  ) {}
  get numTokens() {
    return this.seq.numTokens;
  }
  get numBlocks() {
    return this.seq.tables?.[this.table]?.length ?? 0;
  }
  get sharedBlocks() {
    return 0;
  }
  get kvCachedTokens() {
    return this.seq.kvCachedTokens;
  }
  set kvCachedTokens(n: number) {
    this.seq.kvCachedTokens = n;
  }
  appendToken(t: number) {
    this.seq.appendToken(t);
  }
  get blockTable() {
    return this.seq.tables?.[this.table] ?? [];
  }
}

export class ModelCompositeReplayTarget implements ReplayTarget<View> {
  private readonly composite: ModelCompositeBlockManager;

  constructor(readonly pool: ModelBlockManagerPool) {
    this.composite = pool.compositeManager(0)!;
  }
  newSequence(buffer: Int32Array, promptLength: number): View {
    return new View(this.pool.newSequence(buffer.subarray(0, promptLength)), this.composite.capacityIndex);
  }
  allocate(s: View, numTokens?: number) {
    return this.pool.allocate(s.seq, numTokens);
  }
  cache() {}
  deallocate(s: View) {
    this.pool.deallocate(s.seq);
  }
  blocksEvicted() {
    return 0;
  }
  numFreeBlocks() {
    return this.pool.numFreeBlocks()[0]!;
  }
  numBlocksInPrefixCache() {
    return 0;
  }
  subManagers() {
    const m = this.composite;
    return m.specs.map((s, i) => ({
      kind: s.kind,
      blockSize: s.blockSize,
      numBlocks: s.numBlocks,
      peakUsedBlocks: m.peaks[i]!,
      allocatedBlocks: m.subs[i]!.counters.blocksAllocated,
      releasedBlocks: m.releasedOut[i]!,
    }));
  }
}
