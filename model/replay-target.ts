// The replay loop's view of the model pool: the shape of the library's
// ReplayTarget, met structurally (the model imports nothing from bindings/).

import { ModelBlockManagerPool } from './block-manager-pool.js';
import type { ModelSequence } from './sequence.js';

export class ModelReplayTarget {
  constructor(readonly pool: ModelBlockManagerPool) {}
  newSequence(buffer: Int32Array, promptLength: number): ModelSequence {
    return this.pool.newSequence(buffer.subarray(0, promptLength));
  }
  allocate(seq: ModelSequence, numTokens?: number): boolean {
    return this.pool.allocate(seq, numTokens);
  }
  cache(seq: ModelSequence): void {
    this.pool.cache(seq);
  }
  deallocate(seq: ModelSequence): void {
    this.pool.deallocate(seq);
  }
  blocksEvicted(): number {
    return this.pool.managers.reduce((a, m) => a + m.counters.blocksEvicted, 0);
  }
  numFreeBlocks(): number {
    return this.pool.numFreeBlocks().reduce((a, b) => a + b, 0);
  }
  numBlocksInPrefixCache(): number {
    return this.pool.numBlocksInPrefixCache().reduce((a, b) => a + b, 0);
  }
}
