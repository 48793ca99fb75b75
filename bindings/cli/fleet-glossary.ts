// What every field of a fleet result means: the table's labels, `--help`
// and docs/fleet.md (a test checks that the page lists each key).

import type { GlossaryEntry } from './glossary.js';

/** The fleet's figures, in table order. */
export const FLEET_GLOSSARY: readonly GlossaryEntry[] = [
  { key: 'requests', label: 'requests', meaning: 'requests read from the trace (after --limit), rejected ones included' },
  { key: 'rejected', label: 'rejected', meaning: 'requests whose prompt could not be placed on their engine even with nothing else running there' },
  { key: 'truncated', label: 'truncated', meaning: 'requests that stopped decoding early because no block was left for the next token' },
  { key: 'finishedEarly', label: 'finished early', meaning: "engines[].finishedEarly summed: requests cut short while they still decoded (xllm: the kernel finished them to make room when a pool ran out of blocks; --scheduler continuous and --engine vllm: the truncated requests)" },
  { key: 'promptBlocks', label: 'prompt blocks', meaning: 'full prompt blocks of the requests placed, over every engine' },
  { key: 'matchedBlocks', label: 'matched blocks', meaning: 'prompt blocks found in the prefix cache of the engine the request was sent to' },
  { key: 'hitRate', label: 'hit rate', meaning: 'matched blocks / prompt blocks over the fleet (a fraction in JSON and CSV, a percentage in the table)' },
  { key: 'evictedBlocks', label: 'evicted blocks', meaning: 'prefix-cache entries evicted over every engine' },
  { key: 'steps', label: 'steps', meaning: 'the first step at which every request had arrived and none ran or waited' },
  { key: 'queueing.meanSteps', label: 'queueing mean (steps)', meaning: 'mean steps from arrival to admission on the engine (rejected requests included)' },
  { key: 'queueing.p50Steps', label: 'queueing p50 (steps)', meaning: 'median of those delays (nearest rank)' },
  { key: 'queueing.p99Steps', label: 'queueing p99 (steps)', meaning: '99th percentile of those delays (nearest rank)' },
  { key: 'queueing.maxSteps', label: 'queueing max (steps)', meaning: 'the longest delay' },
  { key: 'loadImbalance', label: 'load imbalance', meaning: 'K x (sum over steps of the largest engine load) / (sum over steps of all engine loads); load = running + queued; 1 = even, K = one engine carries all' },
];

/** Rows of the per-engine table (`engines` in JSON). */
export const FLEET_ENGINE_GLOSSARY: readonly GlossaryEntry[] = [
  { key: 'engines[].engine', label: 'engine', meaning: 'the engine index' },
  { key: 'engines[].requests', label: 'requests', meaning: 'requests the router sent to it' },
  { key: 'engines[].rejected', label: 'rejected', meaning: 'of them, rejected' },
  { key: 'engines[].hitRate', label: 'hit rate', meaning: "its matched blocks / its prompt blocks" },
  { key: 'engines[].matchedBlocks', label: 'matched', meaning: 'prompt blocks found in its prefix cache' },
  { key: 'engines[].evictedBlocks', label: 'evicted', meaning: 'its prefix-cache evictions' },
  { key: 'engines[].idChecksum', label: 'id checksum', meaning: "the replay kernel's checksum of the ids it handed out" },
  { key: 'engines[].finishedEarly', label: 'finished early', meaning: 'sequences the kernel finished while they still decoded, to make room after a failed allocation (vllm: requests dropped after giving tokens)' },
];

/** The fleet's own configuration (`config` also has every replay option, as replay's). */
export const FLEET_CONFIG_GLOSSARY: readonly GlossaryEntry[] = [
  { key: 'config.engines', label: 'engines', meaning: 'engines, each a pool of the replay options' },
  { key: 'config.router', label: 'router', meaning: 'the routing policy' },
  { key: 'config.stepMs', label: 'step ms', meaning: 'milliseconds of trace time per step' },
  { key: 'config.arrival', label: 'arrival', meaning: 'timestamps (floor(timestamp / step ms)) or instant (every request at step 0)' },
  { key: 'config.prefixWeight', label: 'prefix weight', meaning: 'prefix routers: weight of the matched share of the prompt' },
  { key: 'config.loadWeight', label: 'load weight', meaning: 'prefix routers: weight of the load share of the slots' },
  { key: 'config.affinityBlocks', label: 'affinity blocks', meaning: 'session affinity: the block (1-based) whose key is hashed' },
];

/** What `config` adds for a fleet of vLLM engines (--engine vllm; on either clock). */
export const FLEET_VLLM_CONFIG_GLOSSARY: readonly GlossaryEntry[] = [
  { key: 'config.engine', label: 'engine', meaning: "vllm: every engine is vLLM v1's scheduler and block pool (absent for xllm, the default)" },
  { key: 'config.maxNumBatchedTokens', label: 'max num batched tokens', meaning: 'vllm, and timed with scheduler continuous: the token budget of a step (vllm: per dp rank)' },
  { key: 'config.longPrefillTokenThreshold', label: 'long prefill token threshold', meaning: "vllm: a prefill's tokens per step at most (0: no cap)" },
  { key: 'config.schedulerReserveFullIsl', label: 'reserve full ISL', meaning: 'vllm: a request is admitted only if blocks for all its tokens fit' },
];

/** The latency figures of a timed run, each {count, mean, p50, p90, p95, p99, max} in ms (docs/fleet-time.md). */
export const LATENCY_FIGURES = ['ttftMs', 'tpotMs', 'itlMs', 'e2eMs', 'queueMs'] as const;
export const LATENCY_FIGURE_FIELDS = ['count', 'mean', 'p50', 'p90', 'p95', 'p99', 'max'] as const;

/** A timed run's figures (`latency` in JSON; the CSV has each scalar, the figures one column per field). */
export const FLEET_LATENCY_GLOSSARY: readonly GlossaryEntry[] = [
  { key: 'latency.ttftMs', label: 'TTFT', meaning: 'timed: time to first token (first token minus arrival), ms: count, mean, p50, p90, p95, p99 (linear between the closest ranks, as numpy.percentile) and max over the requests that produced one' },
  { key: 'latency.tpotMs', label: 'TPOT', meaning: 'timed: time per output token, (last token - first token) / (tokens - 1) per request of two tokens or more, ms, the same fields' },
  { key: 'latency.itlMs', label: 'ITL', meaning: 'timed: inter-token latency, every gap between two consecutive tokens of a request, over all requests (count: gaps), ms, the same fields' },
  { key: 'latency.e2eMs', label: 'E2E', meaning: 'timed: end-to-end latency, last token minus arrival, ms, the same fields' },
  { key: 'latency.queueMs', label: 'queue', meaning: 'timed: admission (the first prefill step) or rejection minus arrival, ms, the same fields' },
  { key: 'latency.durationMs', label: 'duration (ms)', meaning: 'timed: from the first arrival to the last finish' },
  { key: 'latency.originMs', label: 'first arrival (trace ms)', meaning: "timed: the first arrival in the trace's milliseconds (timestamp / speedup); every time of the run counts from it" },
  { key: 'latency.completed', label: 'completed', meaning: 'timed: requests that produced at least one token' },
  { key: 'latency.outputTokens', label: 'output tokens', meaning: 'timed: tokens the requests produced' },
  { key: 'latency.outputTokensPerSecond', label: 'output tokens / s', meaning: 'timed: output tokens per second of the duration' },
  { key: 'latency.requestsPerSecond', label: 'requests / s', meaning: 'timed: completed requests per second of the duration' },
  { key: 'latency.prefillTokens', label: 'prefill tokens', meaning: 'timed: prompt tokens computed (recomputed ones included)' },
  { key: 'latency.cachedTokens', label: 'cached tokens', meaning: 'timed: prompt tokens a cache held, so not computed' },
  { key: 'latency.hostLoadedBlocks', label: 'host loaded blocks', meaning: 'timed: blocks the host tiers loaded back to the devices' },
  { key: 'latency.preemptions', label: 'preemptions', meaning: 'timed: sequences preempted (scheduler continuous and engine vllm; recomputed later)' },
];

/** Extra columns of the per-engine table of a timed run (`latency.engines` in JSON). */
export const FLEET_LATENCY_ENGINE_GLOSSARY: readonly GlossaryEntry[] = [
  { key: 'latency.engines[].utilisation', label: 'utilisation', meaning: 'timed: the share of the duration the engine spent stepping (a percentage in the table)' },
  { key: 'latency.engines[].busyMs', label: 'busy ms', meaning: 'timed: milliseconds its steps took' },
  { key: 'latency.engines[].steps', label: 'steps', meaning: 'timed: steps it ran' },
  { key: 'latency.engines[].preemptions', label: 'preempted', meaning: 'timed: sequences it preempted' },
];

/** What `config` adds for a timed run. */
export const FLEET_TIMED_CONFIG_GLOSSARY: readonly GlossaryEntry[] = [
  { key: 'config.timing', label: 'timing', meaning: "timed: the timing model's name: polynomial, table or profile with what made it (file or preset, a SHA-256 of its content, TP and parameters), or your model's" },
  { key: 'config.profile', label: 'profile', meaning: "timed, with a GPU profile: its preset's name or the folder given" },
  { key: 'config.tp', label: 'tp', meaning: 'timed, with a GPU profile: tensor-parallel GPUs per dp rank' },
  { key: 'config.scheduler', label: 'scheduler', meaning: 'timed: xllm or continuous (vllm with --engine vllm)' },
  { key: 'config.maxNumBatchedTokens', label: 'max num batched tokens', meaning: 'timed, continuous: the token budget of a step' },
  { key: 'config.speedup', label: 'speedup', meaning: 'timed, open loop: timestamps are divided by it' },
  { key: 'config.concurrency', label: 'concurrency', meaning: 'timed: requests kept in flight (0: open loop, arrivals from the trace)' },
  { key: 'config.kvCacheGib', label: 'KV cache GiB per GPU', meaning: 'timed, when given: the KV cache of each GPU, which set --num-blocks' },
  { key: 'config.gpuMemoryUtilization', label: 'GPU memory utilization', meaning: "timed, when given: the share of each GPU's memory whose rest after weights and activations set --num-blocks" },
  { key: 'config.kvBlocksPerEngine', label: 'KV blocks per engine', meaning: 'timed: blocks of each engine, all its dp ranks (padding included)' },
  { key: 'config.kvGibPerEngine', label: 'KV GiB per engine', meaning: "timed: the GiB those blocks take on the engine's GPUs (from the timing model's KV bytes per token)" },
];

/** The fleet's result fields, one line each: `kvpool fleet --help`, and `kvpool sweep --help` for fleet sweeps. */
export function fleetFieldLines(): string[] {
  const all = [
    ...FLEET_GLOSSARY, ...FLEET_ENGINE_GLOSSARY, ...FLEET_LATENCY_GLOSSARY, ...FLEET_LATENCY_ENGINE_GLOSSARY,
    { key: 'latency.requests', label: '', meaning: "timed, JSON with --per-request: each request's arrivalMs, admittedMs, firstTokenMs, finishMs (null: never got there), outputTokens, engine and tokenSteps (runs [first step, count] of its engine's steps that gave its tokens), and each engine's stepEndMs: every token's time" },
    { key: 'warnings', label: '', meaning: 'notes on a result that is probably not what was meant (also on stderr)' },
  ];
  const w = Math.max(...all.map((e) => e.key.length));
  return all.map((e) => `  ${e.key.padEnd(w)}  ${e.meaning}`);
}

/** `--help` text of `kvpool fleet`. */
export function fleetGlossaryHelp(): string {
  return ['', 'Result fields (JSON keys; the table uses the same words):', ...fleetFieldLines(),
    '', 'Every output echoes the configuration (`config`: the replay options and the fleet\'s). Timed runs (--timing, --scheduler continuous) add `latency`. Details: docs/fleet.md, docs/fleet-time.md.',
    '', 'Engines (--engine; docs/engines.md): xllm (default) is xLLM\'s pool under the replay kernel, with every replay mode (eviction',
    'policies, host tier, sliding window, linear state) and --scheduler continuous; vllm is vLLM v1\'s scheduler and block pool,',
    'exactly, one vLLM step per fleet step (timed: the step its batch costs), with --max-num-batched-tokens (default 8192),',
    '--max-num-seqs, --long-prefill-token-threshold and --no-scheduler-reserve-full-isl. Choose vllm to plan a vLLM fleet.'].join('\n');
}
