// What an eviction policy other than LRU costs in core memory, and what
// running out of memory while setting one up says: the figures safety.md
// gives, and the "it needs" of the error, are measured here.

import { describe, expect, it } from 'vitest';
import { plainCore } from '../bindings/core/plain-core.js';
import { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';
import { heapInUse, takeAllRegions } from './support/core-memory.js';

const N = 1 << 16;

function bytesOf(evictionPolicy: 'lru' | 'lfu' | 'priority'): number {
  const rt = plainCore();
  const before = heapInUse(rt);
  const m = new BlockManagerImpl({ numBlocks: N, blockSize: 4, evictionPolicy });
  const used = heapInUse(rt) - before;
  m.dispose();
  return used;
}

describe('eviction policy memory', () => {
  it('LFU adds 12 bytes per block to LRU, priority 48 (a few hundred bytes of fixed size aside)', () => {
    bytesOf('lru'); // the first manager also sets up the core's staging areas
    const lru = bytesOf('lru');
    expect(lru / N).toBeCloseTo(53, 1);
    expect((bytesOf('lfu') - lru) / N).toBeCloseTo(12, 1);
    expect((bytesOf('priority') - lru) / N).toBeCloseTo(48, 1);
  });

  it('running out while setting up a policy names what it needed, and keeps nothing', () => {
    const rt = plainCore();
    const taken = takeAllRegions(rt);
    try {
      // Room for the manager's own arrays (about 53 bytes per block) but not the priority policy's 48 more.
      const n = 3_500_000;
      const big = taken.filter((p) => p !== 0).slice(0, 1);
      for (const p of big) rt.release(p);
      const before = heapInUse(rt);
      expect(() => new BlockManagerImpl({ numBlocks: n, blockSize: 4, evictionPolicy: 'priority' })).toThrow(
        /^kvpool: Wasm memory exhausted setting up the 'priority' eviction policy on a manager of 3500000 blocks \(it needs 160\.2 MiB; a 32-bit core holds at most 4 GiB, /,
      );
      expect(heapInUse(rt)).toBe(before);
    } finally {
      for (const p of taken) rt.release(p);
    }
  });
});
