// Model of SlidingWindowBlockManager: a prefix-cache-off manager plus the
// window rule (docs/composite.md, the window rule). Mirrors bindings/managers/sliding-window-block-manager.ts.

import { ModelBlockManager } from './block-manager-impl.js';

export class ModelSlidingWindowBlockManager extends ModelBlockManager {
  readonly window: number;

  constructor(numBlocks: number, blockSize: number, window: number) {
    super({ numBlocks, blockSize, enablePrefixCache: false });
    this.window = window;
  }

  override allocateShared(): number[] {
    return [];
  }

  override cache(): number {
    return 0;
  }

  /** Leading positions that slid out once `cached` tokens are computed. */
  outOfWindow(cached: number, length: number): number {
    const W = Math.max(this.window, 1);
    if (cached < W) return 0;
    return Math.min(Math.floor((cached - W + 1) / this.blockSize), length);
  }

  /** Gives back, in index order, the still-held ids of the slid-out positions and writes -1 there. */
  releaseOutOfWindow(table: number[], cached: number): number {
    const upto = this.outOfWindow(cached, table.length);
    let n = 0;
    for (let i = 0; i < upto; i++) {
      if (table[i] === -1) continue;
      this.deallocate([table[i]!]);
      table[i] = -1;
      n++;
    }
    return n;
  }
}
