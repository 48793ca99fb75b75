// The vLLM engine's metrics (docs/metrics.md, the vLLM engine): vLLM's own
// names where kvpool counts the same thing, worked out on a hand-made
// scenario and parsed back from the Prometheus text; the prefix-cache
// counters agree with the replay's figures on the Mooncake trace; a fleet
// exposes each engine's.

import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { describe, expect, it } from 'vitest';
import { Fleet } from '../bindings/fleet/fleet.js';
import { readTraceFile } from '../bindings/node/trace-file.js';
import type { TraceRequest } from '../bindings/replay/trace.js';
import { VllmEngine } from '../bindings/vllm/engine.js';
import { VllmKvCacheManager } from '../bindings/vllm/kv-cache-manager.js';
import { vllmMetrics, VLLM_METRICS } from '../bindings/vllm/metrics.js';
import { replayVllmSync } from '../bindings/vllm/replay.js';
import { VllmRequest } from '../bindings/vllm/request.js';
import { TRACE_PATH } from './support/externals.js';

const req = (L: number, O: number, id: number): TraceRequest => ({ inputLength: L, outputLength: O, hashIds: Int32Array.of(id) });

function step(e: VllmEngine): void {
  e.schedule(null);
  e.complete();
}

describe('the vLLM engine\'s metrics', () => {
  it('count what vLLM counts, named as vLLM names it, per rank (a worked scenario)', () => {
    // Two ranks of 8 usable blocks of 4 tokens, no budget to speak of.
    const kvs = [0, 1].map((dpRank) => new VllmKvCacheManager({ numBlocks: 9, blockSize: 4, dpRank }));
    const e = new VllmEngine(kvs, { maxNumSeqs: 4, maxNumBatchedTokens: 1000, longPrefillTokenThreshold: 0, reserveFullIsl: true });
    e.add(new VllmRequest(0, req(8, 2, 1))); // rank 0
    e.add(new VllmRequest(1, req(12, 1, 2))); // rank 1 (4 x 1 waiting on rank 0)
    step(e);
    // Rank 0 holds request 0's two blocks; rank 1's request gave its one token and left.
    let m = vllmMetrics(e);
    expect(m.map((x) => [x.running, x.waiting, x.kvCacheUsage])).toEqual([[1, 0, 2 / 8], [0, 0, 0]]);
    step(e);
    // The same prompts again: each looks up at most (tokens - 1) / 4 blocks and finds them all.
    e.add(new VllmRequest(2, req(8, 1, 1))); // rank 0
    e.add(new VllmRequest(3, req(12, 1, 2))); // rank 1
    step(e);
    expect(e.hasWork).toBe(false);
    m = vllmMetrics(e);
    // Rank 0: queried 8 + 8 tokens, hit 1 block of 4; request 2 computed its last block again: 3 keyed blocks, 2 keys.
    // Rank 1: queried 12 + 12, hit 2 blocks of 4; 4 keyed blocks, 3 keys. Allocated: 2 + 1 + 1 and 3 + 1.
    expect(m.map((x) => [x.requests, x.queries, x.hits, x.cachedBlocks, x.cachedKeys, x.allocatedBlocks, x.kvCacheUsage, x.totalBlocks])).toEqual([
      [2, 16, 4, 3, 2, 4, 0, 8],
      [2, 24, 8, 4, 3, 4, 0, 8],
    ]);
    const text = e.metricsText({ model_name: 'm' });
    const families = parsePrometheusTextFormat(text);
    expect(families.map((f) => f.name)).toEqual(VLLM_METRICS.map(([n]) => n));
    const value = (name: string) => families.find((f) => f.name === name)!.metrics.map((x) => Number(x.value));
    expect(value('vllm:prefix_cache_queries_total')).toEqual([16, 24]);
    expect(value('vllm:prefix_cache_hits_total')).toEqual([4, 8]);
    expect(value('vllm:kv_cache_usage_perc')).toEqual([0, 0]);
    expect(value('vllm:num_preemptions_total')).toEqual([0, 0]);
    expect(value('kvpool_prefix_cache_keys')).toEqual([2, 3]);
    expect(families.find((f) => f.name === 'vllm:prefix_cache_hits_total')!.type).toBe('COUNTER');
    expect(families.find((f) => f.name === 'vllm:kv_cache_usage_perc')!.metrics.map((x) => x.labels)).toEqual([{ model_name: 'm', engine: '0' }, { model_name: 'm', engine: '1' }]);
    expect(() => e.metricsText({ engine: '3' })).toThrow(/"engine" is set by the vLLM engine/);
    for (const kv of kvs) kv.dispose();
  });

  it('counts a preempted request\'s lookups apart, as vLLM does, and its preemptions', () => {
    // 4 usable blocks of 4 tokens: two requests whose outputs outgrow them; the newer is preempted.
    const kv = new VllmKvCacheManager({ numBlocks: 5, blockSize: 4 });
    const e = new VllmEngine([kv], { maxNumSeqs: 4, maxNumBatchedTokens: 1000, longPrefillTokenThreshold: 0, reserveFullIsl: false });
    e.add(new VllmRequest(0, req(4, 8, 1)));
    e.add(new VllmRequest(1, req(4, 8, 2)));
    while (e.hasWork) step(e);
    const [m] = vllmMetrics(e);
    expect(m!.preemptions).toBeGreaterThan(0);
    expect(m!.preemptedRequests).toBeGreaterThan(0);
    expect(m!.requests).toBe(2);
    expect(m!.queries).toBe(8);
    expect(e.schedulers[0]!.counts.preemptions).toBe(m!.preemptions);
    kv.dispose();
  });

  it('agree with the replay\'s figures: every first lookup admitted (a pool large enough), hits are matched blocks in tokens', async () => {
    const trace = await readTraceFile(TRACE_PATH, 300);
    const r = replayVllmSync({ engine: 'vllm', trace, dpSize: 2, maxNumBatchedTokens: 8192 });
    expect(r.preemptions).toBe(0);
    const f = new Fleet({ trace, engine: 'vllm', engines: 1, dpSize: 2, arrival: 'instant', maxNumBatchedTokens: 8192 });
    try {
      f.run();
      const text = f.metricsText(0, { model_name: 'x' });
      const families = parsePrometheusTextFormat(text);
      const sum = (name: string) => families.find((x) => x.name === name)!.metrics.reduce((a, m) => a + Number(m.value), 0);
      expect(sum('vllm:prefix_cache_hits_total')).toBe(r.matchedBlocks * 16);
      expect(sum('vllm:prefix_cache_queries_total')).toBe(trace.reduce((a, q) => a + q.inputLength, 0));
      expect(sum('kvpool_evicted_blocks_total')).toBe(r.evictedBlocks);
      expect(sum('vllm:num_requests_running') + sum('vllm:num_requests_waiting')).toBe(0);
    } finally {
      f.dispose();
    }
    const x = new Fleet({ trace: trace.slice(0, 20), engines: 1 });
    x.run();
    expect(x.metricsText(0)).toContain('kvpool_prefix_cache_lookups_total{dp_rank="0"}');
    x.dispose();
  });
});
