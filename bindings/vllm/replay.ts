// The vLLM engine's replay (docs/engines.md): options under kvpool's names
// and vLLM's where both mean the same, checked before anything runs; the
// figures as the vLLM harness defines them, the configuration echoed, per
// rank figures, warnings.

import { loadCore } from '../core/plain-core.js';
import type { ReplayProgress } from '../replay/kernel.js';
import { traceArg } from '../replay/replay.js';
import type { TraceRequest } from '../replay/trace.js';
import { replayWarnings } from '../replay/warnings.js';
import { generateWorkload } from '../replay/workload.js';
import { checkBool, checkInt, checkKeys, checkObject, checkOptionalFunction } from '../validate.js';
import { checkVllmTraceRequest } from './request.js';
import type { VllmStepRecord } from './engine.js';
import { openVllmCaches } from './open-engine.js';
import { VllmReplayLoop, type VllmRankFigures, type VllmReplayFigures } from './replay-loop.js';
import type { VllmKvCacheManager, VllmKvEvent } from './kv-cache-manager.js';

/** A budget no step reaches: every prompt in one step (what the vLLM harness replays by default). */
export const UNLIMITED_TOKENS = 0x7fffffff;

export interface VllmReplayOptions {
  engine: 'vllm';
  /** As `replay()`'s: parsed requests (the Node entry also takes a file or built-in name). Default: the built-in workload. */
  trace?: readonly TraceRequest[] | string;
  /** Requests of the built-in workload when no trace is given (default 2000). */
  requests?: number;
  limit?: number;
  /** Tokens per block (default 16). */
  blockSize?: number;
  /** Blocks per dp rank, the null block included (default 65536). vLLM's name: `numGpuBlocksOverride`. */
  numBlocks?: number;
  /** `numBlocks` under vLLM's name (`--num-gpu-blocks-override`). */
  numGpuBlocksOverride?: number;
  /** Data-parallel ranks, each with its scheduler and pool, stepping in lockstep (default 1). */
  dpSize?: number;
  /** Requests running at once per rank (default 32). vLLM's name: `maxNumSeqs`. */
  maxRunning?: number;
  /** `maxRunning` under vLLM's name (`--max-num-seqs`). */
  maxNumSeqs?: number;
  /** Tokens scheduled per step and rank (vLLM's max_num_batched_tokens; default: no limit, every prompt in one step). */
  maxNumBatchedTokens?: number;
  /** A prefill's tokens per step at most (vLLM's long_prefill_token_threshold; default 0: no cap). */
  longPrefillTokenThreshold?: number;
  /**
   * Admit a request only if blocks for all of its tokens fit (vLLM's
   * scheduler_reserve_full_isl; default true, vLLM's default). It changes
   * nothing without a token budget or threshold.
   */
  schedulerReserveFullIsl?: boolean;
  /** XXH3 seed of the block keys, and of the built-in workload (default 1024; ids, hits and evictions do not depend on it). */
  seed?: number;
  onProgress?: ReplayProgress;
  /** Called after every step with its record (the object is reused: copy what you keep). */
  onStep?: (step: Readonly<VllmStepRecord>) => void;
  /**
   * Records the KV-cache events in vLLM's order and hands each step's to
   * this function after the step (every rank's, rank 0's first), with the
   * step's number (from 1); a step without events is not reported.
   */
  onEvents?: (events: readonly VllmKvEvent[], step: number) => void;
}

/** The configuration a vLLM result was produced with, defaults filled in. */
export interface VllmReplayConfig {
  engine: 'vllm';
  trace: string;
  requests: number | null;
  limit: number | null;
  blockSize: number;
  numBlocks: number;
  dpSize: number;
  maxNumSeqs: number;
  /** null: no limit. */
  maxNumBatchedTokens: number | null;
  longPrefillTokenThreshold: number;
  schedulerReserveFullIsl: boolean;
  seed: number;
}

/** A vLLM replay's result (docs/engines.md, figures). */
export interface VllmReplayRun {
  engine: 'vllm';
  mode: 'vllm';
  config: VllmReplayConfig;
  requests: number;
  rejected: number;
  truncated: number;
  preemptions: number;
  promptBlocks: number;
  matchedBlocks: number;
  hitRate: number;
  evictedBlocks: number;
  allocatedBlocks: number;
  idChecksum: number;
  freeBlocksAtEnd: number;
  cachedBlocksAtEnd: number;
  cachedKeysAtEnd: number;
  finished: number;
  steps: number;
  scheduledTokens: number;
  resumedPrefills: number;
  allocateCalls: number;
  seconds: number;
  allocateCallsPerSecond: number;
  ranks: VllmRankFigures[];
  warnings: string[];
}

export interface ParsedVllmReplayOptions {
  blockSize: number;
  numBlocks: number;
  dpSize: number;
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
  longPrefillTokenThreshold: number;
  reserveFullIsl: boolean;
  seed: number;
  limit: number | undefined;
  requests: number;
}

export const VLLM_REPLAY_OPTION_KEYS: readonly string[] = [
  'engine', 'trace', 'requests', 'limit', 'blockSize', 'numBlocks', 'numGpuBlocksOverride', 'dpSize', 'maxRunning', 'maxNumSeqs',
  'maxNumBatchedTokens', 'longPrefillTokenThreshold', 'schedulerReserveFullIsl', 'seed', 'onProgress', 'onStep', 'onEvents',
];

/** The xllm engine's options, each with why the vllm engine refuses it. */
export const XLLM_ONLY_OPTIONS: Readonly<Record<string, string>> = {
  publishAfterPrefill: 'vLLM caches a prompt\'s blocks as soon as it allocates them, so there is nothing to publish early',
  eviction: 'vLLM has one eviction order, its free queue\'s (the head goes first); lru, lfu and priority are the xllm engine\'s',
  hostBlocks: 'the vllm engine does not model a host tier (vLLM\'s CPU offloading) yet',
  storeBlocks: 'the vllm engine does not model a host tier or a KV-cache store yet',
  slidingWindow: 'the vllm engine does not model sliding-window attention (vLLM\'s hybrid KV-cache manager) yet',
  compressRatios: 'the vllm engine does not model composite pools yet',
  linearStateSlots: 'the vllm engine does not model linear-state (Mamba) caching yet',
};

/** The same option under kvpool's and vLLM's names: one value, however it was given. */
function alias(o: Record<string, unknown>, ours: string, theirs: string): unknown {
  const a = o[ours];
  const b = o[theirs];
  if (a !== undefined && b !== undefined && a !== b) {
    throw new RangeError(`options.${ours} and options.${theirs} are one option (kvpool's name and vLLM's) and disagree: ${String(a)} and ${String(b)}`);
  }
  return a ?? b;
}

export function parseVllmReplayOptions(options: VllmReplayOptions): ParsedVllmReplayOptions {
  checkObject('options', options);
  const o = options as unknown as Record<string, unknown>;
  if (o['engine'] !== 'vllm') throw new TypeError(`options.engine must be 'vllm' here, got ${JSON.stringify(o['engine'])}`);
  for (const k of Object.keys(o)) {
    const why = XLLM_ONLY_OPTIONS[k];
    if (why !== undefined && o[k] !== undefined) throw new TypeError(`options.${k} cannot be used with engine 'vllm': ${why}`);
  }
  checkKeys('options', o, VLLM_REPLAY_OPTION_KEYS);
  checkOptionalFunction('options.onProgress', o['onProgress']);
  checkOptionalFunction('options.onStep', o['onStep']);
  checkOptionalFunction('options.onEvents', o['onEvents']);
  const maxNumBatchedTokens = o['maxNumBatchedTokens'];
  return {
    blockSize: checkInt('options.blockSize', o['blockSize'] ?? 16, 1),
    numBlocks: checkInt(o['numBlocks'] !== undefined ? 'options.numBlocks' : 'options.numGpuBlocksOverride', alias(o, 'numBlocks', 'numGpuBlocksOverride') ?? 65536, 2),
    dpSize: checkInt('options.dpSize', o['dpSize'] ?? 1, 1, 4096),
    maxNumSeqs: checkInt(o['maxRunning'] !== undefined ? 'options.maxRunning' : 'options.maxNumSeqs', alias(o, 'maxRunning', 'maxNumSeqs') ?? 32, 1),
    maxNumBatchedTokens: maxNumBatchedTokens === undefined ? UNLIMITED_TOKENS : checkInt('options.maxNumBatchedTokens', maxNumBatchedTokens, 1),
    longPrefillTokenThreshold: checkInt('options.longPrefillTokenThreshold', o['longPrefillTokenThreshold'] ?? 0, 0),
    reserveFullIsl: checkBool('options.schedulerReserveFullIsl', o['schedulerReserveFullIsl'] ?? true),
    seed: checkInt('options.seed', o['seed'] ?? 1024, 0, Number.MAX_SAFE_INTEGER),
    limit: o['limit'] === undefined ? undefined : checkInt('options.limit', o['limit'], 0),
    requests: checkInt('options.requests', o['requests'] ?? 2000, 0),
  };
}

export function vllmReplayConfig(p: ParsedVllmReplayOptions, trace: string | undefined): VllmReplayConfig {
  return {
    engine: 'vllm',
    trace: trace ?? 'workload',
    requests: trace === undefined ? p.requests : null,
    limit: p.limit ?? null,
    blockSize: p.blockSize,
    numBlocks: p.numBlocks,
    dpSize: p.dpSize,
    maxNumSeqs: p.maxNumSeqs,
    maxNumBatchedTokens: p.maxNumBatchedTokens === UNLIMITED_TOKENS ? null : p.maxNumBatchedTokens,
    longPrefillTokenThreshold: p.longPrefillTokenThreshold,
    schedulerReserveFullIsl: p.reserveFullIsl,
    seed: p.seed,
  };
}

/** Replays a trace (or the built-in workload) on the vLLM engine (docs/engines.md) once the core is loaded. */
export async function replayVllm(options: VllmReplayOptions): Promise<VllmReplayRun> {
  const p = parseVllmReplayOptions(options);
  traceArg(options);
  await loadCore();
  return replayVllmSync(options, p);
}

/** A vLLM replay set up to be stepped: its loop and caches (rank r's at index r); `finish()` once the loop is done, then `dispose()`. */
export interface OpenVllmReplay {
  readonly loop: VllmReplayLoop;
  readonly kvs: readonly VllmKvCacheManager[];
  finish(): VllmReplayRun;
  dispose(): void;
}

/**
 * The replay of `options` ready to step, its caches recording KV events when
 * `recordEvents` (the command's --events and --zmq drain them after each
 * step). `traceName` is what `config.trace` says.
 */
export function openVllmReplay(options: VllmReplayOptions, parsed?: ParsedVllmReplayOptions, traceName?: string, recordEvents = false): OpenVllmReplay {
  const p = parsed ?? parseVllmReplayOptions(options);
  const given = traceArg(options);
  const trace = given ?? generateWorkload({ requests: p.requests, seed: p.seed });
  checkPrompts(trace, p.limit);
  const config = vllmReplayConfig(p, given === undefined ? undefined : (traceName ?? 'requests'));
  const shared = { h: 0 };
  const kvs = openVllmCaches(p, shared);
  if (recordEvents) for (const kv of kvs) kv.recordEvents(true);
  const loop = new VllmReplayLoop(
    trace, p.limit, kvs,
    { maxNumSeqs: p.maxNumSeqs, maxNumBatchedTokens: p.maxNumBatchedTokens, longPrefillTokenThreshold: p.longPrefillTokenThreshold, reserveFullIsl: p.reserveFullIsl },
    { ...(options.onStep && { onStep: options.onStep }), ...(options.onProgress && { onProgress: options.onProgress }), ...(p.dpSize > 1 && { idChecksum: () => shared.h }) },
  );
  return {
    loop,
    kvs,
    finish: () => vllmRunOf(config, loop.finish()),
    dispose: () => {
      for (const kv of kvs) kv.dispose();
    },
  };
}

/** `replayVllm` with the core loaded (always the case in Node); `traceName` is what `config.trace` says. */
export function replayVllmSync(options: VllmReplayOptions, parsed?: ParsedVllmReplayOptions, traceName?: string): VllmReplayRun {
  const onEvents = options.onEvents;
  const r = openVllmReplay(options, parsed, traceName, onEvents !== undefined);
  try {
    if (onEvents === undefined) while (r.loop.step());
    else {
      for (let step = 1; r.loop.step(); step++) {
        let events: VllmKvEvent[] | null = null;
        for (const kv of r.kvs) {
          const e = kv.drainEvents();
          if (e.length === 0) continue;
          if (events === null) events = e;
          else for (const x of e) events.push(x);
        }
        if (events !== null) onEvents(events, step);
      }
    }
    return r.finish();
  } finally {
    r.dispose();
  }
}

/** A result from the loop's figures, under `config`, its warnings made. */
export function vllmRunOf(config: VllmReplayConfig, r: VllmReplayFigures): VllmReplayRun {
  const run: VllmReplayRun = {
    engine: 'vllm',
    mode: 'vllm',
    config,
    requests: r.requests,
    rejected: r.rejected,
    truncated: r.truncated,
    preemptions: r.preemptions,
    promptBlocks: r.promptBlocks,
    matchedBlocks: r.matchedBlocks,
    hitRate: r.promptBlocks === 0 ? 0 : Math.round((r.matchedBlocks / r.promptBlocks) * 1e6) / 1e6,
    evictedBlocks: r.evictedBlocks,
    allocatedBlocks: r.allocatedBlocks,
    idChecksum: r.idChecksum,
    freeBlocksAtEnd: r.freeBlocksAtEnd,
    cachedBlocksAtEnd: r.cachedBlocksAtEnd,
    cachedKeysAtEnd: r.cachedKeysAtEnd,
    finished: r.finished,
    steps: r.steps,
    scheduledTokens: r.scheduledTokens,
    resumedPrefills: r.resumedPrefills,
    allocateCalls: r.allocateCalls,
    seconds: r.seconds,
    allocateCallsPerSecond: r.seconds > 0 ? Math.round(r.allocateCalls / r.seconds) : 0,
    ranks: r.ranks,
    warnings: [],
  };
  run.warnings = replayWarnings({ ...run, config: { ...config } });
  return run;
}

/** Every request a run will read, checked before anything runs (vLLM refuses an empty prompt: it computes one token at least). */
export function checkPrompts(trace: readonly TraceRequest[], limit: number | undefined): void {
  const n = Math.min(limit ?? trace.length, trace.length);
  for (let r = 0; r < n; r++) checkVllmTraceRequest(r, trace[r]!);
}
