// Model of SingleBlockManager: an id pool with no prefix cache (block size 1);
// allocateShared finds nothing and cache does nothing.

import { ModelBlockManager } from './block-manager-impl.js';

export class ModelSingleBlockManager extends ModelBlockManager {
  constructor(numBlocks: number) {
    super({ numBlocks, blockSize: 1, enablePrefixCache: false });
  }

  override allocateShared(): number[] {
    return [];
  }

  override cache(): number {
    return 0;
  }
}
