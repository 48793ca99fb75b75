// The options that put a fleet on a millisecond clock (docs/fleet-time.md):
// a timing model, the scheduler each engine runs, its token budget, and how
// requests arrive (the trace's timestamps sped up, or a closed loop).

import { kvCacheBlocks, GIB } from '../timing/kv-capacity.js';
import { ProfileModel } from '../timing/profile-model.js';
import { timingModel, type TimingModel, type TimingSpecInput } from '../timing/timing-model.js';
import { checkInt, describe } from '../validate.js';

/**
 * 'xllm': the replay kernel's admission (the exact reference, as on the step
 * clock), each step timed; 'continuous': a vLLM-v1-style step with chunked
 * prefill, a token budget and recompute preemption.
 */
export type FleetScheduler = 'xllm' | 'continuous';

export const FLEET_SCHEDULERS: readonly FleetScheduler[] = ['xllm', 'continuous'];

/** The scheduler a timed run echoes: the xllm engine's (options.scheduler), or 'vllm' for a fleet of vLLM engines (vLLM's own). */
export type TimedScheduler = FleetScheduler | 'vllm';

/** The default token budget of a continuous-batching step (vLLM's max_num_batched_tokens). */
export const DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192;

export interface TimedFleetOptions {
  /**
   * Keep time in milliseconds with this model: `true` for the default
   * polynomial, a spec, or your own TimingModel. Left out (and no
   * 'continuous' scheduler): the step clock.
   */
  timing?: true | TimingSpecInput | TimingModel;
  /** Default 'xllm'; 'continuous' puts the fleet on the millisecond clock (with the default model unless `timing` says). */
  scheduler?: FleetScheduler;
  /** 'continuous' only: prompt plus decode tokens one step computes (default 8192). */
  maxNumBatchedTokens?: number;
  /** Timed, open loop: request r arrives at its timestamp / speedup (default 1). */
  speedup?: number;
  /** Timed, closed loop: keep this many requests in flight over the fleet, in trace order, ignoring timestamps. */
  concurrency?: number;
  /**
   * Timed: the KV cache of each GPU, GiB, in place of `numBlocks`: whole
   * blocks of the timing model's KV bytes per token (docs/timing.md, KV capacity).
   */
  kvCacheGib?: number;
  /**
   * Timed, with a profile: the share of each GPU's memory the engine may use
   * (vLLM's gpu_memory_utilization); what its weights and an activation
   * reserve leave sizes the KV cache, in place of `numBlocks`.
   */
  gpuMemoryUtilization?: number;
}

export const TIMED_KEYS = ['timing', 'scheduler', 'maxNumBatchedTokens', 'speedup', 'concurrency', 'kvCacheGib', 'gpuMemoryUtilization'] as const;

/** What the result's `config` echoes of a timed run. */
export interface TimedConfig {
  /** The timing model's name. */
  timing: string;
  scheduler: TimedScheduler;
  /** 'continuous' and engine 'vllm' (on either clock). */
  maxNumBatchedTokens?: number;
  speedup: number;
  /** 0: open loop (arrivals from the trace). */
  concurrency: number;
  /** A profile model's bundle (a preset's name, or the folder given). */
  profile?: string;
  /** A profile model's tensor-parallel GPUs per dp rank. */
  tp?: number;
  /** As given: the KV cache of each GPU, GiB. */
  kvCacheGib?: number;
  /** As given: the share of each GPU's memory. */
  gpuMemoryUtilization?: number;
  /** Blocks of an engine, all its dp ranks (numBlocks x dpSize, padding included). */
  kvBlocksPerEngine?: number;
  /** GiB of KV cache those blocks take over all the engine's GPUs (when the timing model knows its KV bytes per token). */
  kvGibPerEngine?: number;
}

export interface ParsedTimedOptions {
  model: TimingModel;
  scheduler: TimedScheduler;
  maxNumBatchedTokens: number;
  speedup: number;
  concurrency: number;
  config: TimedConfig;
}

/**
 * The timed options, checked; undefined when the run is on the step clock
 * (then none of them may be given). With engine 'vllm' the scheduler is
 * vLLM's own (options.scheduler is refused before) and its token budget
 * (`vllmBudget`, parsed with the engine's options) holds on either clock.
 */
export function parseTimedOptions(o: TimedFleetOptions & { arrival?: unknown }, engine: 'xllm' | 'vllm' = 'xllm', vllmBudget?: number): ParsedTimedOptions | undefined {
  const vllm = engine === 'vllm';
  const scheduler: TimedScheduler = vllm ? 'vllm' : (o.scheduler ?? 'xllm');
  if (!vllm && !FLEET_SCHEDULERS.includes(scheduler as FleetScheduler)) throw new RangeError(`options.scheduler must be one of ${FLEET_SCHEDULERS.join(', ')}, got ${describe(scheduler)}`);
  const timed = (o.timing !== undefined && o.timing !== (false as unknown)) || scheduler === 'continuous';
  if (!timed) {
    const stray = TIMED_KEYS.find((k) => k !== 'timing' && k !== 'scheduler' && !(vllm && k === 'maxNumBatchedTokens') && o[k] !== undefined);
    if (stray !== undefined) throw new RangeError(`options.${stray} applies to a timed fleet: give options.timing (true for the default model)${vllm ? '' : " or scheduler 'continuous'"}`);
    return undefined;
  }
  const model = timingModel(o.timing === true || o.timing === undefined ? undefined : o.timing);
  if (scheduler === 'xllm' && o.maxNumBatchedTokens !== undefined) throw new RangeError("options.maxNumBatchedTokens applies to scheduler 'continuous' or engine 'vllm'");
  const maxNumBatchedTokens = vllm ? vllmBudget! : checkInt('options.maxNumBatchedTokens', o.maxNumBatchedTokens ?? DEFAULT_MAX_NUM_BATCHED_TOKENS, 1);
  const speedup = o.speedup ?? 1;
  if (typeof speedup !== 'number' || !Number.isFinite(speedup) || speedup <= 0) throw new RangeError(`options.speedup must be a finite number > 0, got ${describe(speedup)}`);
  const concurrency = checkInt('options.concurrency', o.concurrency ?? 0, 0);
  if (concurrency > 0 && o.speedup !== undefined) throw new RangeError('options.speedup applies to open-loop arrivals; a closed loop (options.concurrency) ignores timestamps');
  if (concurrency > 0 && o.arrival !== undefined) throw new RangeError('options.arrival applies to open-loop arrivals; a closed loop (options.concurrency) ignores timestamps');
  return {
    model,
    scheduler,
    maxNumBatchedTokens,
    speedup,
    concurrency,
    config: {
      timing: model.name,
      ...(model instanceof ProfileModel && { profile: model.bundle.name, tp: model.p.tp }),
      scheduler,
      ...(scheduler === 'continuous' && { maxNumBatchedTokens }),
      speedup,
      concurrency,
      ...(o.kvCacheGib !== undefined && { kvCacheGib: o.kvCacheGib }),
      ...(o.gpuMemoryUtilization !== undefined && { gpuMemoryUtilization: o.gpuMemoryUtilization }),
    },
  };
}

/**
 * The blocks per dp rank that `kvCacheGib` or `gpuMemoryUtilization` give
 * (undefined: neither given), refusing them beside `numBlocks`.
 */
export function kvSizedBlocks(o: TimedFleetOptions & { numBlocks?: number }, model: TimingModel, blockSize: number, dpSize: number): number | undefined {
  const by = o.kvCacheGib !== undefined ? 'kvCacheGib' : o.gpuMemoryUtilization !== undefined ? 'gpuMemoryUtilization' : undefined;
  if (by === undefined) return undefined;
  if (o.numBlocks !== undefined) throw new RangeError(`options.numBlocks and options.${by} both size the KV cache: give one`);
  if (o.kvCacheGib !== undefined && o.gpuMemoryUtilization !== undefined) throw new RangeError('options.kvCacheGib and options.gpuMemoryUtilization both size the KV cache: give one');
  const kv = model.kv;
  if (kv === undefined) throw new RangeError(`options.${by}: timing model ${model.name} does not say how many bytes a token's KV takes (give options.numBlocks)`);
  if (by === 'kvCacheGib') {
    if (typeof o.kvCacheGib !== 'number' || !Number.isFinite(o.kvCacheGib) || o.kvCacheGib <= 0) throw new RangeError(`options.kvCacheGib must be a finite number > 0, got ${describe(o.kvCacheGib)}`);
    return kvCacheBlocks({ bytesPerToken: kv.bytesPerToken, blockSize, kvCacheGib: o.kvCacheGib }).blocks;
  }
  const u = o.gpuMemoryUtilization;
  if (typeof u !== 'number' || !(u > 0 && u <= 1)) throw new RangeError(`options.gpuMemoryUtilization must be in (0, 1], got ${describe(u)}`);
  if (kv.gpuBytes === undefined || kv.weightBytes === undefined) throw new RangeError(noGpuMemory(model));
  try {
    return kvCacheBlocks({ bytesPerToken: kv.bytesPerToken, blockSize, gpuMemoryUtilization: u, gpuMemoryGib: kv.gpuBytes / GIB, weightBytes: kv.weightBytes(dpSize) }).blocks;
  } catch (e) {
    throw new RangeError(`options.${(e as Error).message}`);
  }
}

/** Why a share of GPU memory cannot size `model`'s cache, and what to give. */
function noGpuMemory(model: TimingModel): string {
  // A profile knows its weights; of its GPU's memory, only that of the GPUs kvpool knows by name.
  if (model instanceof ProfileModel) return `options.gpuMemoryUtilization: profile ${model.bundle.name} was measured on ${model.bundle.hardware}, a GPU whose memory kvpool does not know: give it in GiB (options.timing.gpuMemoryGib), or size the KV cache by options.kvCacheGib or options.numBlocks`;
  if (model.kv?.weightBytes !== undefined) return `options.gpuMemoryUtilization: timing model ${model.name} does not know its GPU's memory (its kv.gpuBytes): size the KV cache by options.kvCacheGib or options.numBlocks`;
  return `options.gpuMemoryUtilization: timing model ${model.name} does not know its GPU's memory and its weights (a GPU profile does): size the KV cache by options.kvCacheGib or options.numBlocks`;
}

/** What a timed run echoes of its KV cache: blocks and GiB per engine. */
export function kvEcho(model: TimingModel, numBlocks: number, blockSize: number, dpSize: number): Pick<TimedConfig, 'kvBlocksPerEngine' | 'kvGibPerEngine'> {
  const kv = model.kv;
  const blocks = numBlocks * dpSize;
  if (kv === undefined) return { kvBlocksPerEngine: blocks };
  return { kvBlocksPerEngine: blocks, kvGibPerEngine: Math.round(((blocks * blockSize * kv.bytesPerToken * kv.gpusPerRank) / GIB) * 1000) / 1000 };
}
