// Pool metrics: the per-rank counters of the core, the prefix-cache figures
// derived from them, their sum over ranks, and the Prometheus text format.
// Everything is read from counters the core keeps anyway: no hot-path cost.

import type { BlockManagerStats } from '../managers/block-manager.js';
import { checkObject, describe } from '../validate.js';

/** One rank's figures (`pool.stats()[rank]`), or their sum (`pool.totalStats()`). */
export interface PoolRankStats extends BlockManagerStats {
  /** Single ids free / held on this rank. */
  singleBlocksFree: number;
  singleBlocksUsed: number;
  /** Tokens of the full blocks looked up in the prefix cache: `blocksQueried * blockSize`. */
  prefixQueryTokens: number;
  /** Tokens of the blocks found: `blocksHit * blockSize` (an exact-prompt hit's last block, given back, included). */
  prefixHitTokens: number;
  /** `blocksHit / blocksQueried` (0 before the first lookup). */
  prefixHitRate: number;
}

/** A rank's figures from its managers' counters. */
export function rankStats(kv: BlockManagerStats, blockSize: number, singleFree: number, singleUsed: number): PoolRankStats {
  return {
    ...kv,
    singleBlocksFree: singleFree,
    singleBlocksUsed: singleUsed,
    prefixQueryTokens: kv.blocksQueried * blockSize,
    prefixHitTokens: kv.blocksHit * blockSize,
    prefixHitRate: kv.blocksQueried > 0 ? kv.blocksHit / kv.blocksQueried : 0,
  };
}

/**
 * The sum over ranks; the hit rate is recomputed from the sums, and
 * `peakUsedBlocks` is the sum of the ranks' peaks (an upper bound of the pool's).
 */
export function sumStats(ranks: readonly PoolRankStats[]): PoolRankStats {
  const total = { ...ranks[0]! };
  for (const r of ranks.slice(1)) {
    for (const k of Object.keys(total) as Array<keyof PoolRankStats>) total[k] += r[k];
  }
  total.prefixHitRate = total.blocksQueried > 0 ? total.blocksHit / total.blocksQueried : 0;
  return total;
}

type Kind = 'counter' | 'gauge';

/** Exported metrics: name (without the `kvpool_` prefix), type, help, and the figure. */
export const METRICS: ReadonlyArray<readonly [string, Kind, string, (s: PoolRankStats) => number]> = [
  ['prefix_cache_lookups_total', 'counter', 'Prefix-cache lookups (calls that looked up at least one full block).', (s) => s.matchCalls],
  ['prefix_cache_queried_blocks_total', 'counter', 'Full blocks looked up in the prefix cache.', (s) => s.blocksQueried],
  ['prefix_cache_hit_blocks_total', 'counter', 'Blocks found in the prefix cache.', (s) => s.blocksHit],
  ['prefix_cache_queried_tokens_total', 'counter', 'Tokens of the full blocks looked up in the prefix cache.', (s) => s.prefixQueryTokens],
  ['prefix_cache_hit_tokens_total', 'counter', 'Tokens of the blocks found in the prefix cache.', (s) => s.prefixHitTokens],
  ['prefix_cache_hit_rate', 'gauge', 'Hit blocks / queried blocks since the pool was created.', (s) => s.prefixHitRate],
  ['prefix_cache_inserted_blocks_total', 'counter', 'New prefix-cache entries.', (s) => s.blocksInserted],
  ['evicted_blocks_total', 'counter', 'Prefix-cache entries evicted.', (s) => s.blocksEvicted],
  ['allocated_blocks_total', 'counter', 'Block ids handed out.', (s) => s.blocksAllocated],
  ['allocation_failures_total', 'counter', 'Block allocations refused for lack of blocks.', (s) => s.allocationFailures],
  ['blocks_total', 'gauge', 'Usable KV blocks (padding block excluded).', (s) => s.numTotalBlocks],
  ['blocks_used', 'gauge', 'KV blocks held by sequences (or anything but the prefix cache).', (s) => s.numUsedBlocks],
  ['blocks_cached', 'gauge', 'KV blocks in the prefix cache (held or not).', (s) => s.numBlocksInPrefixCache],
  ['blocks_evictable', 'gauge', 'Cached KV blocks nothing else holds.', (s) => s.numEvictableBlocks],
  ['blocks_free', 'gauge', 'KV blocks on the free stack.', (s) => s.numFreeBlocks],
  ['blocks_used_peak', 'gauge', 'The most KV blocks used at once.', (s) => s.peakUsedBlocks],
  ['single_blocks_used', 'gauge', 'Single ids held by sequences.', (s) => s.singleBlocksUsed],
  ['single_blocks_free', 'gauge', 'Single ids free.', (s) => s.singleBlocksFree],
];

const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;

/** Validated constant labels (e.g. `{ instance, model }`); `reserved` (the rank's label: `dp_rank`, a vLLM engine's `engine`) is set by the exporter. */
export function checkLabels(labels: unknown, reserved = 'dp_rank', by = 'the pool'): Array<[string, string]> {
  checkObject('labels', labels);
  return Object.entries(labels as object).map(([k, v]) => {
    if (!LABEL_NAME.test(k) || k.startsWith('__')) throw new RangeError(`labels: ${JSON.stringify(k)} is not a valid Prometheus label name`);
    if (k === reserved) throw new RangeError(`labels: "${reserved}" is set by ${by}`);
    if (typeof v !== 'string') throw new TypeError(`labels.${k} must be a string, got ${describe(v)}`);
    return [k, v];
  });
}

function escapeValue(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

/** One metric family: its full name, type, help, and the figure of a rank. */
export type MetricFamily<S> = readonly [string, Kind, string, (s: S) => number];

/** The Prometheus text exposition (format 0.0.4) of `families`, one series per rank, labelled `rankLabel` after the constant `labels`. */
export function renderFamilies<S>(families: ReadonlyArray<MetricFamily<S>>, ranks: readonly S[], labels: Array<[string, string]>, rankLabel: string): string {
  const fixed = labels.map(([k, v]) => `${k}="${escapeValue(v)}",`).join('');
  const lines: string[] = [];
  for (const [name, kind, help, get] of families) {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${kind}`);
    ranks.forEach((s, r) => lines.push(`${name}{${fixed}${rankLabel}="${r}"} ${get(s)}`));
  }
  return lines.join('\n') + '\n';
}

/** The Prometheus text exposition (format 0.0.4) of every rank's figures. */
export function renderMetrics(ranks: readonly PoolRankStats[], labels: Array<[string, string]>): string {
  return renderFamilies(METRICS.map(([name, kind, help, get]) => [`kvpool_${name}`, kind, help, get] as const), ranks, labels, 'dp_rank');
}
