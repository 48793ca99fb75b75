// Model of SlidingWindowBlockManager: a prefix-cache-off manager plus the
// window rule (docs/composite.md, the window rule). Mirrors bindings/managers/sliding-window-block-manager.ts.

import { ModelBlockManager } from './block-manager-impl.js';
import { modelInt } from './validate.js';

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
    modelInt('kvCachedTokens', cached);
    modelInt('length', length);
    const W = Math.max(this.window, 1);
    if (cached < W) return 0;
    return Math.min(Math.floor((cached - W + 1) / this.blockSize), length);
  }

  /**
   * Gives back, in index order, the still-held ids of the slid-out positions
   * and writes -1 there. Placeholders (-1) must lead the table, and every id
   * released must be held: otherwise a RangeError and nothing changes.
   */
  releaseOutOfWindow(table: number[], cached: number): number {
    modelInt('kvCachedTokens', cached);
    let first = 0;
    while (first < table.length && table[first] === -1) first++;
    const upto = this.outOfWindow(cached, table.length);
    if (upto <= first) return 0;
    const ids = table.slice(first, upto);
    if (ids.includes(-1)) throw new RangeError('model: a placeholder follows a held block');
    this.deallocate(ids);
    table.fill(-1, first, upto);
    return upto - first;
  }
}
