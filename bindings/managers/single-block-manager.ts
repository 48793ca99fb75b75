// SingleBlockManager (docs/managers.md): a pool of single per-sequence ids
// (embedding ids, linear-state slots). Block size 1, id 0 reserved, no
// prefix cache: allocateShared finds nothing and cache does nothing.

import { loadCore } from '../core/plain-core.js';
import { checkInt, checkKeys, checkObject } from '../validate.js';
import type { BlockManager } from './block-manager.js';
import { CoreManager } from './core-manager.js';
import { noCaching, noSharedBlocks } from './no-prefix-cache.js';

export interface SingleBlockManagerOptions {
  /** Physical ids, padding id 0 included (>= 2). */
  numBlocks: number;
}

function parse(opts: SingleBlockManagerOptions) {
  checkObject('options', opts);
  checkKeys('options', opts, ['numBlocks']);
  return { numBlocks: checkInt('options.numBlocks', opts.numBlocks, 2), blockSize: 1, prefixOn: false, seedLo: 0, seedHi: 0 };
}

export class SingleBlockManager extends CoreManager implements BlockManager {
  constructor(options: SingleBlockManagerOptions) {
    super(parse(options));
  }

  static async create(options: SingleBlockManagerOptions): Promise<SingleBlockManager> {
    parse(options);
    await loadCore();
    return new SingleBlockManager(options);
  }

  allocateShared(tokens: ArrayLike<number>, existingShared: ArrayLike<number> = []): Int32Array {
    this.live();
    return noSharedBlocks(tokens, existingShared);
  }

  cache(tokens: ArrayLike<number>, ids: ArrayLike<number>, existingSharedCount = 0): number {
    this.live();
    return noCaching(tokens, ids, existingSharedCount);
  }
}
