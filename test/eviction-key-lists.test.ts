// LFU and priority keep one recency list per key below 128 and put larger
// keys in a side heap (assembly/lru.ts). Random differential runs rarely hit
// one block 128 times, so this drives chains past that, alongside chains
// with few hits, and compares each victim and the whole eviction order with
// the reference model.

import { describe, expect, it } from 'vitest';
import { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';
import { ModelBlockManager } from '../model/block-manager-impl.js';

const B = 2;
const chain = (root: number, blocks: number) => Array.from({ length: blocks * B }, (_, i) => root * 1000 + i);

function pair(numBlocks: number) {
  return {
    core: new BlockManagerImpl({ numBlocks, blockSize: B, evictionPolicy: 'lfu' }),
    model: new ModelBlockManager({ numBlocks, blockSize: B, evictionPolicy: 'lfu' }),
  };
}

function agree(core: BlockManagerImpl, model: ModelBlockManager): void {
  core.check();
  expect([...core.lruOrder()]).toEqual(model.prefix.lruOrder());
}

describe('LFU with keys past the per-key lists', () => {
  it('evicts in the model order after chains were hit 1, 60, 127, 128, 129 and 300 times', () => {
    const { core, model } = pair(40);
    try {
      const hits = [1, 60, 127, 128, 129, 300];
      hits.forEach((n, root) => {
        const t = chain(root, 3);
        const ids = core.allocate(3)!;
        expect([...ids]).toEqual(model.allocate(3));
        expect(core.cache(t, ids, 0)).toBe(model.cache(t, [...ids], 0));
        core.deallocate(ids);
        model.deallocate([...ids]);
        for (let i = 0; i < n; i++) {
          const a = core.allocateShared(t);
          expect([...a]).toEqual(model.allocateShared(t));
          core.deallocate(a);
          model.deallocate([...a]);
        }
        agree(core, model);
      });
      // Hold the most-hit chain while evicting: its entries are parked, then come back.
      const held = core.allocateShared(chain(5, 3));
      expect([...held]).toEqual(model.allocateShared(chain(5, 3)));
      for (let k = 0; k < 6; k++) {
        expect(core.evict(1)).toBe(model.evict(1));
        agree(core, model);
      }
      core.deallocate(held);
      model.deallocate([...held]);
      agree(core, model);
      while (core.numBlocksInPrefixCache() > 0) {
        expect(core.evict(1)).toBe(model.evict(1));
        expect([...core.freeIds()]).toEqual(model.free);
        agree(core, model);
      }
    } finally {
      core.dispose();
    }
  });
});
