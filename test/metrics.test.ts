// Pool metrics: stats() per rank and in total, and the Prometheus text format
// (parsed back with a Prometheus text parser and compared with stats()).

import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { describe, expect, it } from 'vitest';
import { METRICS } from '../bindings/pool/metrics.js';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';

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

describe('pool.metricsText()', () => {
  it('is Prometheus text that parses back to stats(), with HELP, TYPE and labels', () => {
    const p = scenario();
    const text = p.metricsText({ model: 'llama "3"', instance: 'a\\b' });
    const families = parsePrometheusTextFormat(text);
    expect(families.map((f) => f.name)).toEqual(METRICS.map(([n]) => `kvpool_${n}`));
    const stats = p.stats();
    for (const [name, kind, help, get] of METRICS) {
      const f = families.find((x) => x.name === `kvpool_${name}`)!;
      expect(f.type).toBe(kind.toUpperCase());
      expect(f.help).toBe(help);
      expect(f.metrics.map((m) => m.labels)).toEqual([
        { model: 'llama "3"', instance: 'a\\b', dp_rank: '0' },
        { model: 'llama "3"', instance: 'a\\b', dp_rank: '1' },
      ]);
      expect(f.metrics.map((m) => Number(m.value))).toEqual(stats.map(get));
    }
    expect(text).toContain('kvpool_evicted_blocks_total{model="llama \\"3\\"",instance="a\\\\b",dp_rank="0"} 2\n');
    p.dispose();
  });

  it('rejects bad labels', () => {
    const p = new BlockManagerPool({ numBlocks: 4, blockSize: B });
    expect(() => p.metricsText({ 'bad-name': 'x' })).toThrow(/"bad-name" is not a valid Prometheus label name/);
    expect(() => p.metricsText({ dp_rank: '1' })).toThrow(/"dp_rank" is set by the pool/);
    expect(() => p.metricsText({ model: 3 as unknown as string })).toThrow(/labels.model must be a string, got 3/);
    expect(() => p.metricsText(null as never)).toThrow(/labels must be an object/);
    p.dispose();
  });
});
