// Pool metrics: stats() per rank and in total, and the Prometheus text format
// (parsed back with a Prometheus text parser and compared with stats()).

import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { describe, expect, it } from 'vitest';
import { BlockManagerPool, Sequence } from '../bindings/index.js';

const B = 4;
const prompt = (blocks: number, base: number, extra = 1) => Array.from({ length: blocks * B + extra }, (_, i) => base + i);

function finish(p: BlockManagerPool, s: Sequence): void {
  s.kvCachedTokens = s.numTokens;
  p.deallocate(s);
}

/** Two ranks: rank 0 sees a miss, a 2-block hit, then two evictions and a failure; rank 1 a miss. */
function scenario(): BlockManagerPool {
  const p = new BlockManagerPool({ numBlocks: 6, blockSize: B, dpSize: 2 });
  const a = new Sequence(prompt(2, 100)); // 3 blocks, rank 0
  expect(p.allocate(a)).toBe(true);
  const b = new Sequence(prompt(4, 500, 0)); // 4 blocks, rank 1
  expect(p.allocate(b)).toBe(true);
  finish(p, a); // rank 0 caches 2
  finish(p, b); // rank 1 caches 4
  const c = new Sequence(prompt(2, 100, 3)); // rank 0 (5 free > 1): hits 2
  expect(p.allocate(c)).toBe(true);
  expect(c.dpRank).toBe(0);
  expect(c.sharedBlocks).toBe(2);
  p.deallocate(c);
  const d = new Sequence(prompt(5, 900)); // rank 0 (3 free > 1): 6 blocks > 5 usable -> evicts 2, fails
  expect(p.allocate(d)).toBe(false);
  expect(d.dpRank).toBe(0);
  p.check();
  return p;
}

describe('pool.stats()', () => {
  it('counts lookups, hits, evictions, failures and the peak per rank', () => {
    const p = scenario();
    const [r0, r1] = p.stats();
    expect(r0).toMatchObject({
      matchCalls: 3, blocksQueried: 9, blocksHit: 2, prefixQueryTokens: 36, prefixHitTokens: 8, prefixHitRate: 2 / 9,
      blocksEvicted: 2, allocationFailures: 1, peakUsedBlocks: 3, numUsedBlocks: 0, numBlocksInPrefixCache: 0, numFreeBlocks: 5,
    });
    expect(r1).toMatchObject({
      matchCalls: 1, blocksQueried: 4, blocksHit: 0, prefixQueryTokens: 16, prefixHitTokens: 0, prefixHitRate: 0,
      blocksEvicted: 0, allocationFailures: 0, peakUsedBlocks: 4, numUsedBlocks: 0, numBlocksInPrefixCache: 4, numFreeBlocks: 1,
    });
    const t = p.totalStats();
    expect(t).toMatchObject({ matchCalls: 4, blocksQueried: 13, blocksHit: 2, blocksEvicted: 2, allocationFailures: 1, peakUsedBlocks: 7, numTotalBlocks: 10 });
    expect(t.prefixHitRate).toBeCloseTo(2 / 13, 12);
    p.dispose();
  });
});

describe('pool utilization figures', () => {
  it('kvCacheUtilization is the least loaded rank\'s used / total, gpuCacheUsage the mean over ranks', () => {
    const p = new BlockManagerPool({ numBlocks: 6, blockSize: B, dpSize: 2 }); // 5 usable blocks per rank
    expect([p.kvCacheUtilization(), p.gpuCacheUsage()]).toEqual([0, 0]);
    const a = new Sequence(prompt(2, 100)); // 9 tokens, 3 blocks, rank 0 (a tie goes to the lowest rank)
    expect(p.allocate(a)).toBe(true);
    // A new sequence would go to rank 1 (5 free > 2): 0 / 5 used; the mean is (3/5 + 0) / 2.
    expect(p.kvCacheUtilization()).toBe(0);
    expect(p.gpuCacheUsage()).toBeCloseTo(0.3, 12);
    const b = new Sequence(prompt(1, 500)); // 5 tokens, 2 blocks, rank 1
    expect(p.allocate(b)).toBe(true);
    expect(b.dpRank).toBe(1);
    // Rank 1 has 3 free > 2: its 2 / 5; the mean is (3/5 + 2/5) / 2.
    expect(p.kvCacheUtilization()).toBeCloseTo(0.4, 12);
    expect(p.gpuCacheUsage()).toBeCloseTo(0.5, 12);
    p.deallocate([a, b]); // nothing computed: nothing cached
    expect([p.kvCacheUtilization(), p.gpuCacheUsage()]).toEqual([0, 0]);
    p.dispose();
  });
});

describe('pool.metricsText()', () => {
  it('is Prometheus text that parses back to the scenario\'s figures, with HELP, TYPE and labels', () => {
    const p = scenario();
    const text = p.metricsText({ model: 'llama "3"', instance: 'a\\b' });
    const families = parsePrometheusTextFormat(text);
    // The scenario's figures, rank 0 then rank 1 (worked out in scenario()):
    // rank 0 looked up 2 + 2 + 5 full blocks in 3 calls and found 2, inserted
    // a's 2 blocks, handed out a's 3 and c's 1, evicted 2 and refused d;
    // rank 1 looked up b's 4 blocks, inserted them and keeps them cached.
    // 5 usable blocks per rank; 201 single ids (202 minus padding) each.
    const expected: Array<[string, string, [number, number]]> = [
      ['prefix_cache_lookups_total', 'COUNTER', [3, 1]],
      ['prefix_cache_queried_blocks_total', 'COUNTER', [9, 4]],
      ['prefix_cache_hit_blocks_total', 'COUNTER', [2, 0]],
      ['prefix_cache_queried_tokens_total', 'COUNTER', [36, 16]],
      ['prefix_cache_hit_tokens_total', 'COUNTER', [8, 0]],
      ['prefix_cache_hit_rate', 'GAUGE', [2 / 9, 0]],
      ['prefix_cache_inserted_blocks_total', 'COUNTER', [2, 4]],
      ['evicted_blocks_total', 'COUNTER', [2, 0]],
      ['allocated_blocks_total', 'COUNTER', [4, 4]],
      ['allocation_failures_total', 'COUNTER', [1, 0]],
      ['blocks_total', 'GAUGE', [5, 5]],
      ['blocks_used', 'GAUGE', [0, 0]],
      ['blocks_cached', 'GAUGE', [0, 4]],
      ['blocks_evictable', 'GAUGE', [0, 4]],
      ['blocks_free', 'GAUGE', [5, 1]],
      ['blocks_used_peak', 'GAUGE', [3, 4]],
      ['single_blocks_used', 'GAUGE', [0, 0]],
      ['single_blocks_free', 'GAUGE', [201, 201]],
    ];
    expect(families.map((f) => f.name)).toEqual(expected.map(([n]) => `kvpool_${n}`));
    for (const [name, type, values] of expected) {
      const f = families.find((x) => x.name === `kvpool_${name}`)!;
      expect(f.type, name).toBe(type);
      expect(f.help.length, name).toBeGreaterThan(10);
      expect(f.metrics.map((m) => m.labels)).toEqual([
        { model: 'llama "3"', instance: 'a\\b', dp_rank: '0' },
        { model: 'llama "3"', instance: 'a\\b', dp_rank: '1' },
      ]);
      f.metrics.forEach((m, r) => expect(Number(m.value), `${name} rank ${r}`).toBeCloseTo(values[r]!, 12));
    }
    expect(text).toContain('kvpool_evicted_blocks_total{model="llama \\"3\\"",instance="a\\\\b",dp_rank="0"} 2\n');
    p.dispose();
  });

  it('escapes a newline in a label value, and reports a 0 hit rate before any lookup', () => {
    const p = new BlockManagerPool({ numBlocks: 4, blockSize: B, dpSize: 2 });
    expect(p.metricsText({ note: 'a\nb' })).toContain('kvpool_blocks_total{note="a\\nb",dp_rank="0"} 3\n');
    expect(p.stats().map((s) => s.prefixHitRate)).toEqual([0, 0]);
    expect(p.totalStats().prefixHitRate).toBe(0);
    p.dispose();
  });

  it('rejects bad labels', () => {
    const p = new BlockManagerPool({ numBlocks: 4, blockSize: B });
    expect(() => p.metricsText({ __name: 'x' })).toThrow(/"__name" is not a valid Prometheus label name/);
    expect(() => p.metricsText({ 'bad-name': 'x' })).toThrow(/"bad-name" is not a valid Prometheus label name/);
    expect(() => p.metricsText({ dp_rank: '1' })).toThrow(/"dp_rank" is set by the pool/);
    expect(() => p.metricsText({ model: 3 as unknown as string })).toThrow(/labels.model must be a string, got 3/);
    expect(() => p.metricsText(null as never)).toThrow(/labels must be an object/);
    p.dispose();
  });
});
