// A vLLM engine's metrics (docs/metrics.md, the vLLM engine): per dp rank,
// the gauges and counters vLLM's Prometheus endpoint exports under the
// names vLLM gives them where kvpool counts the same thing (requests
// running and waiting, KV-cache usage, prefix-cache queries and hits in
// tokens, preemptions), labelled `engine` with the rank as vLLM labels its
// engine cores, and the pool's own counters under kvpool's names.

import { checkLabels, renderFamilies, type MetricFamily } from '../pool/metrics.js';
import { describe } from '../validate.js';
import type { VllmKvCache, VllmKvFigures, VllmPrefixCacheStats } from './kv-cache.js';

/** One rank's figures. */
export interface VllmRankMetrics extends VllmPrefixCacheStats {
  /** Requests in its running list. */
  running: number;
  /** Requests in its waiting queue (preempted ones included). */
  waiting: number;
  /** 1 - free blocks / usable blocks (vLLM's kv_cache_usage_perc; free: the free queue, cached-free blocks included). */
  kvCacheUsage: number;
  /** Usable blocks (the null block excluded). */
  totalBlocks: number;
  /** Running requests preempted. */
  preemptions: number;
  evictedBlocks: number;
  allocatedBlocks: number;
  /** Blocks that carry a key. */
  cachedBlocks: number;
  /** Distinct keys cached. */
  cachedKeys: number;
}

/** What the metrics read of an engine: each rank's scheduler (a VllmEngine's `schedulers`). */
export interface VllmMetricsSource {
  readonly schedulers: ReadonlyArray<{
    readonly kv: VllmKvCache & { readonly pool?: { readonly numBlocks: number } };
    readonly running: { readonly length: number };
    readonly waiting: { readonly length: number };
    readonly counts: { readonly preemptions: number };
  }>;
}

const NO_LOOKUPS: VllmPrefixCacheStats = { requests: 0, queries: 0, hits: 0, preemptedRequests: 0, preemptedQueries: 0, preemptedHits: 0 };

/** Every rank's figures, rank 0 first. */
export function vllmMetrics(engine: VllmMetricsSource): VllmRankMetrics[] {
  if (engine === null || typeof engine !== 'object' || !Array.isArray(engine.schedulers)) {
    throw new TypeError(`engine must be a VllmEngine (an object with its schedulers), got ${describe(engine)}`);
  }
  return engine.schedulers.map((s) => {
    const f: VllmKvFigures = s.kv.figures();
    const total = s.kv.pool !== undefined ? s.kv.pool.numBlocks - 1 : f.freeBlocksAtEnd + f.cachedBlocksAtEnd;
    const free = s.kv.numFreeBlocks();
    return {
      ...(s.kv.prefixCacheStats?.() ?? NO_LOOKUPS),
      running: s.running.length,
      waiting: s.waiting.length,
      kvCacheUsage: total === 0 ? 0 : 1 - free / total,
      totalBlocks: total,
      preemptions: s.counts.preemptions,
      evictedBlocks: f.evictedBlocks,
      allocatedBlocks: f.allocatedBlocks,
      cachedBlocks: f.cachedBlocksAtEnd,
      cachedKeys: f.cachedKeysAtEnd,
    };
  });
}

/** The families exported, vLLM's names first. */
export const VLLM_METRICS: ReadonlyArray<MetricFamily<VllmRankMetrics>> = [
  ['vllm:num_requests_running', 'gauge', 'Number of requests in model execution batches.', (m) => m.running],
  ['vllm:num_requests_waiting', 'gauge', 'Number of requests waiting to be processed.', (m) => m.waiting],
  ['vllm:kv_cache_usage_perc', 'gauge', 'KV-cache usage. 1 means 100 percent usage.', (m) => m.kvCacheUsage],
  ['vllm:prefix_cache_queries_total', 'counter', 'Prefix cache queries, in terms of number of queried tokens.', (m) => m.queries],
  ['vllm:prefix_cache_hits_total', 'counter', 'Prefix cache hits, in terms of number of cached tokens.', (m) => m.hits],
  ['vllm:num_preemptions_total', 'counter', 'Cumulative number of preemption from the engine.', (m) => m.preemptions],
  ['kvpool_prefix_cache_preempted_queries_total', 'counter', 'Prefix cache queries of preempted requests looked up again, in tokens.', (m) => m.preemptedQueries],
  ['kvpool_prefix_cache_preempted_hits_total', 'counter', 'Prefix cache hits of preempted requests looked up again, in tokens.', (m) => m.preemptedHits],
  ['kvpool_evicted_blocks_total', 'counter', 'Cached blocks that lost their key when the free queue handed them out again.', (m) => m.evictedBlocks],
  ['kvpool_allocated_blocks_total', 'counter', 'Block ids popped from the free queue.', (m) => m.allocatedBlocks],
  ['kvpool_blocks_total', 'gauge', 'Usable KV blocks (the null block excluded).', (m) => m.totalBlocks],
  ['kvpool_blocks_cached', 'gauge', 'KV blocks that carry a key, held or free.', (m) => m.cachedBlocks],
  ['kvpool_prefix_cache_keys', 'gauge', 'Distinct keys cached (copies of a key count once).', (m) => m.cachedKeys],
];

/**
 * Every rank's figures in the Prometheus text exposition (format 0.0.4),
 * one series per rank labelled `engine="<rank>"`, after the constant
 * `labels` you give (vLLM's are `model_name`; `engine` is the exporter's).
 */
export function vllmMetricsText(engine: VllmMetricsSource, labels: Record<string, string> = {}): string {
  return renderFamilies(VLLM_METRICS, vllmMetrics(engine), checkLabels(labels, 'engine', 'the vLLM engine (its dp rank)'), 'engine');
}
