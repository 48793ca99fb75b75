// Exact victims of the non-LRU eviction policies (README "Eviction policies").

import { describe, expect, it } from 'vitest';
import { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { replaySync } from '../bindings/replay/replay.js';

/** Caches `tokens` (block size 1) in fresh blocks and lets them go; returns the ids. */
function cacheAndRelease(m: BlockManagerImpl, tokens: number[]): number[] {
  const ids = [...m.allocate(tokens.length)!];
  m.cache(tokens, ids);
  m.deallocate(ids);
  return ids;
}

/** Matches `tokens` and lets the hits go (one hit each on the policy's count). */
function hit(m: BlockManagerImpl, tokens: number[]): number[] {
  const ids = [...m.allocateShared(tokens)];
  m.deallocate(ids);
  return ids;
}

describe('LFU eviction', () => {
  it('evicts the fewest hits first, least recent among equals, where LRU would take the oldest', () => {
    for (const policy of ['lru', 'lfu'] as const) {
      const m = new BlockManagerImpl({ numBlocks: 5, blockSize: 1, evictionPolicy: policy });
      expect(m.evictionPolicy).toBe(policy);
      const [a] = cacheAndRelease(m, [10]); // 1 hit (its insert)
      expect(hit(m, [10])).toEqual([a]);
      expect(hit(m, [10])).toEqual([a]); // 3
      const [b] = cacheAndRelease(m, [20]); // 1
      const [c] = cacheAndRelease(m, [30]); // 1, newer than b
      expect([a, b, c]).toEqual([1, 2, 3]);
      expect([...m.lruOrder()]).toEqual(policy === 'lru' ? [1, 2, 3] : [2, 3, 1]);
      expect(m.evict(1)).toBe(1);
      expect(m.isCachedId(policy === 'lru' ? 1 : 2)).toBe(false);
      expect(m.evict(2)).toBe(2);
      // The free stack shows the eviction order (pushed in turn).
      expect([...m.freeIds()].slice(-3)).toEqual(policy === 'lru' ? [1, 2, 3] : [2, 3, 1]);
      m.check();
      m.dispose();
    }
  });

  it('skips held entries and finds them again when released', () => {
    const m = new BlockManagerImpl({ numBlocks: 4, blockSize: 1, evictionPolicy: 'lfu' });
    cacheAndRelease(m, [10]); // id 1: 1
    cacheAndRelease(m, [20]); // id 2: 1
    hit(m, [20]); // id 2: 2
    const held = [...m.allocateShared([10])]; // id 1: 2, held
    expect(m.evict(1)).toBe(1); // id 1 is held: id 2 goes
    expect(m.isCachedId(2)).toBe(false);
    expect(m.evict(1)).toBe(0);
    m.deallocate(held);
    m.check();
    expect(m.evict(1)).toBe(1);
    expect(m.isCachedId(1)).toBe(false);
    m.check();
    m.dispose();
  });

  it('keeps a chain deepest first: a child never counts more hits than its parent in one batch', () => {
    const m = new BlockManagerImpl({ numBlocks: 6, blockSize: 1, evictionPolicy: 'lfu' });
    const seq = [...m.allocate(2)!]; // ids 1, 2
    m.cache([1, 2], seq);
    m.deallocate(seq);
    for (let i = 0; i < 3; i++) expect(hit(m, [1, 2])).toEqual([1, 2]); // 4 hits each
    // A sequence holds the chain; only the root is let go and evicted.
    const held = [...m.allocateShared([1, 2])]; // 5 each
    m.deallocate([held[0]!]);
    expect(m.evict(1)).toBe(1);
    expect(m.isCachedId(1)).toBe(false);
    // The root comes back in a new block (1 hit); the child's refresh is clamped to 1.
    const again = [...m.allocate(2)!];
    expect(m.cache([1, 2], again)).toBe(1);
    m.deallocate(again);
    m.deallocate([held[1]!]);
    const root = again[0]!;
    // Equal counts: the child (older) goes before its root, not after it.
    expect([...m.lruOrder()]).toEqual([2, root]);
    expect(m.evict(1)).toBe(1);
    expect(m.isCachedId(2)).toBe(false);
    expect(m.isCachedId(root)).toBe(true);
    m.check();
    m.dispose();
  });

  it('pools take the policy per rank', () => {
    const p = new BlockManagerPool({ numBlocks: 4, blockSize: 1, dpSize: 2, evictionPolicy: 'lfu' });
    expect(p.managers.map((m) => (m as BlockManagerImpl).evictionPolicy)).toEqual(['lfu', 'lfu']);
    const s = new Sequence([7, 8, 9]);
    expect(p.allocate(s)).toBe(true);
    s.kvCachedTokens = 3;
    p.deallocate(s);
    p.check();
    p.dispose();
    const d = new BlockManagerPool({ numBlocks: 4, blockSize: 1 });
    expect((d.managers[0] as BlockManagerImpl).evictionPolicy).toBe('lru');
    d.dispose();
  });

  it('rejects bad policies, naming the option', () => {
    expect(() => new BlockManagerImpl({ numBlocks: 4, blockSize: 1, evictionPolicy: 'mru' as never })).toThrow(
      new TypeError(`options.evictionPolicy must be one of 'lru', 'lfu', got "mru"`),
    );
    expect(() => new BlockManagerImpl({ numBlocks: 4, blockSize: 1, enablePrefixCache: false, evictionPolicy: 'lfu' })).toThrow(RangeError);
    expect(() => new BlockManagerPool({ numBlocks: 4, blockSize: 1, evictionPolicy: 3 as never })).toThrow(TypeError);
    expect(() => new BlockManagerPool({ numBlocks: 4, blockSize: 1, enablePrefixCache: false, evictionPolicy: 'lfu' })).toThrow(RangeError);
    expect(() => replaySync({ workloadRequests: 1, hostBlocks: 8, evictionPolicy: 'lfu' })).toThrow(TypeError);
  });

  it('replays the built-in workload with either policy (LRU unchanged by the option)', () => {
    const base = replaySync({ workloadRequests: 300, numBlocks: 512 });
    const lru = replaySync({ workloadRequests: 300, numBlocks: 512, evictionPolicy: 'lru' });
    const lfu = replaySync({ workloadRequests: 300, numBlocks: 512, evictionPolicy: 'lfu' });
    const pick = (r: typeof base) => [r.matchedBlocks, r.evictedBlocks, r.idChecksum];
    expect(pick(lru)).toEqual(pick(base));
    expect(lfu.promptBlocks).toBe(base.promptBlocks);
    expect(lfu.evictedBlocks).toBeGreaterThan(0);
    expect(pick(lfu)).not.toEqual(pick(base));
  });
});
