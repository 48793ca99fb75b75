// What every field of a vLLM engine replay means (docs/engines.md lists the
// same fields; a test checks that none is missing there): the table's
// labels, `--help` and the CSV columns.

import type { GlossaryEntry } from './glossary.js';

export const VLLM_RESULT_GLOSSARY: readonly GlossaryEntry[] = [
  { key: 'engine', label: 'engine', meaning: 'vllm: vLLM v1\'s scheduler and block pool' },
  { key: 'requests', label: 'requests', meaning: 'requests read from the trace (after --limit), dropped ones included' },
  { key: 'rejected', label: 'rejected', meaning: 'requests dropped before giving a token: they could not be scheduled even with nothing else running' },
  { key: 'truncated', label: 'truncated', meaning: 'requests dropped after giving tokens: preempted, they could not be scheduled again even alone' },
  { key: 'preemptions', label: 'preemptions', meaning: 'running requests preempted to give blocks to older ones (their KV computed again later)' },
  { key: 'promptBlocks', label: 'prompt blocks', meaning: 'full prompt blocks (prompt tokens / block size, rounded down) of each request at its first admission' },
  { key: 'matchedBlocks', label: 'matched blocks', meaning: 'prompt blocks found in the prefix cache at first admissions (resumed prefills not counted)' },
  { key: 'hitRate', label: 'hit rate', meaning: 'matched blocks / prompt blocks (a fraction in JSON and CSV, a percentage in the table)' },
  { key: 'evictedBlocks', label: 'evicted blocks', meaning: 'cached blocks that lost their key when the free queue handed them out again' },
  { key: 'allocatedBlocks', label: 'allocated blocks', meaning: 'block ids popped from the free queue over the run (the null block excluded)' },
  { key: 'idChecksum', label: 'id checksum', meaning: 'h = (h * 31 + id) mod 2^32 over every id popped, in order: equal checksums mean the same ids in the same order' },
  { key: 'freeBlocksAtEnd', label: 'free blocks at end', meaning: 'free blocks without a key at the end (the null block excluded)' },
  { key: 'cachedBlocksAtEnd', label: 'cached blocks at end', meaning: 'blocks that still carry a key at the end (with the free ones: every block but the null block)' },
  { key: 'cachedKeysAtEnd', label: 'cached keys at end', meaning: 'distinct keys cached at the end (vLLM keeps duplicates, so it can be fewer than the blocks)' },
  { key: 'finished', label: 'finished', meaning: 'requests that gave all their output tokens' },
  { key: 'steps', label: 'steps', meaning: 'engine steps (each rank schedules one per step)' },
  { key: 'scheduledTokens', label: 'scheduled tokens', meaning: 'tokens computed over every step: prefill chunks, recomputed prefills and decodes' },
  { key: 'resumedPrefills', label: 'resumed prefills', meaning: 'preempted requests admitted again' },
  { key: 'allocateCalls', label: 'allocate calls', meaning: 'allocate_slots calls (those that needed nothing from the pool included)' },
  { key: 'seconds', label: 'loop seconds', meaning: 'wall time of the replay loop alone (reading the trace excluded)' },
  { key: 'allocateCallsPerSecond', label: 'allocate calls / s', meaning: 'allocate calls per loop second' },
];

export const VLLM_CONFIG_GLOSSARY: readonly GlossaryEntry[] = [
  { key: 'config.engine', label: 'engine', meaning: 'vllm' },
  { key: 'config.trace', label: 'trace', meaning: 'the trace file or built-in name, or "workload" (the generated one)' },
  { key: 'config.requests', label: 'workload requests', meaning: 'requests of the generated workload (null with a trace)' },
  { key: 'config.limit', label: 'limit', meaning: 'only the first N requests (null: all)' },
  { key: 'config.blockSize', label: 'block size', meaning: 'tokens per KV block' },
  { key: 'config.numBlocks', label: 'blocks per rank', meaning: 'blocks per dp rank, the null block included' },
  { key: 'config.dpSize', label: 'dp size', meaning: 'data-parallel ranks, each with its scheduler and pool' },
  { key: 'config.maxNumSeqs', label: 'max num seqs', meaning: 'requests running at once per rank' },
  { key: 'config.maxNumBatchedTokens', label: 'max batched tokens', meaning: 'tokens scheduled per step and rank (null: no limit)' },
  { key: 'config.longPrefillTokenThreshold', label: 'long prefill threshold', meaning: 'a prefill\'s tokens per step at most (0: no cap)' },
  { key: 'config.schedulerReserveFullIsl', label: 'reserve full ISL', meaning: 'a request is admitted only if blocks for all its tokens fit' },
  { key: 'config.seed', label: 'seed', meaning: 'seed of the block keys (and of the generated workload)' },
];

export const VLLM_RANK_GLOSSARY: readonly GlossaryEntry[] = [
  { key: 'ranks[].dpRank', label: 'rank', meaning: 'the dp rank' },
  { key: 'ranks[].admitted', label: 'admitted', meaning: 'requests admitted for the first time on this rank' },
  { key: 'ranks[].preemptions', label: 'preempted', meaning: 'preemptions on this rank' },
  { key: 'ranks[].matchedBlocks', label: 'matched', meaning: 'prefix-cache hit blocks at first admissions' },
  { key: 'ranks[].evictedBlocks', label: 'evicted', meaning: 'keys dropped on this rank' },
  { key: 'ranks[].allocatedBlocks', label: 'allocated', meaning: 'ids popped on this rank' },
  { key: 'ranks[].scheduledTokens', label: 'tokens', meaning: 'tokens scheduled on this rank' },
];

/** `--help` text for the vLLM engine's fields. */
export function vllmGlossaryHelp(): string {
  const all = VLLM_RESULT_GLOSSARY.filter((e) => !['seconds', 'allocateCallsPerSecond', 'requests', 'hitRate', 'idChecksum'].includes(e.key));
  const w = Math.max(...all.map((e) => e.key.length));
  return ['', 'With --engine vllm the result has vLLM\'s figures (docs/engines.md); where they differ from the above:',
    ...all.map((e) => `  ${e.key.padEnd(w)}  ${e.meaning}`)].join('\n');
}
