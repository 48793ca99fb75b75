// The engine a measured run ran, as kvpool replays it (docs/validation.md,
// the settings): each setting from meta.json where the run logged it, from
// the caller where given, else vLLM's default -- with where it came from,
// so that a comparison says what it compared. The KV cache is the run's
// logged num_gpu_blocks; without one it is derived from the GPU's memory
// and the model, and the result says how.

import { DEFAULT_ACTIVATION_RESERVE_GIB, GIB, kvCacheBlocks } from '../timing/kv-capacity.js';
import type { ProfileModel } from '../timing/profile-model.js';
import type { MeasuredMeta } from './run-format.js';

/** A value and where it came from ("meta.json engine_kwargs.max_num_seqs", "vLLM's default", ...). */
export interface Setting<T> {
  value: T;
  source: string;
}

export interface EngineSettings {
  tp: Setting<number>;
  dp: Setting<number>;
  expertParallel: Setting<boolean>;
  maxNumSeqs: Setting<number>;
  maxNumBatchedTokens: Setting<number>;
  blockSize: Setting<number>;
  /** KV blocks of each dp rank, padding included (vLLM's num_gpu_blocks). */
  numBlocks: Setting<number>;
  /** The KV cache those blocks take on each GPU, GiB. */
  kvGibPerGpu: number;
}

/** vLLM's defaults, for settings a run did not log. */
export const VLLM_DEFAULTS = Object.freeze({ blockSize: 16, gpuMemoryUtilization: 0.9 });

const META = 'meta.json';

/** TP as the run ran it (the caller's `tp` wins). */
export function runTp(meta: MeasuredMeta, tp: number | undefined): Setting<number> {
  if (tp !== undefined) return { value: tp, source: 'given (options.tp)' };
  if (meta.tensorParallelSize !== undefined) return { value: meta.tensorParallelSize, source: `${META} engine_kwargs.tensor_parallel_size` };
  return { value: 1, source: "vLLM's default (meta.json does not say)" };
}

function required(run: string, key: string, v: number | undefined): Setting<number> {
  if (v === undefined) throw new RangeError(`${run}/${META}: engine_kwargs.${key} is missing; kvpool cannot know what the engine ran with`);
  return { value: v, source: `${META} engine_kwargs.${key}` };
}

/**
 * The settings a run is replayed with. `model` is the profile model it is
 * timed with (its KV bytes per token and weights size a derived cache);
 * `numBlocks` given replaces the run's own; `gpuMemoryGiven`: the model's
 * GPU memory was given (options.gpuMemoryGib) and wins over the run's.
 */
export function engineSettings(run: string, meta: MeasuredMeta, model: ProfileModel, tp: Setting<number>, numBlocks?: number, gpuMemoryGiven = false): EngineSettings {
  const dp: Setting<number> = meta.dataParallelSize !== undefined ? { value: meta.dataParallelSize, source: `${META} engine_kwargs.data_parallel_size` } : { value: 1, source: "vLLM's default (meta.json does not say)" };
  const expertParallel: Setting<boolean> = meta.enableExpertParallel !== undefined ? { value: meta.enableExpertParallel, source: `${META} engine_kwargs.enable_expert_parallel` } : { value: false, source: "vLLM's default (meta.json does not say)" };
  const blockSize: Setting<number> = meta.blockSize !== undefined ? { value: meta.blockSize, source: `${META} kv_cache.block_size` } : { value: VLLM_DEFAULTS.blockSize, source: "vLLM's default (meta.json does not say)" };
  const kv = model.kv;
  const blockBytes = kv.bytesPerToken * blockSize.value;
  let blocks: Setting<number>;
  if (numBlocks !== undefined) blocks = { value: numBlocks, source: 'given (options.numBlocks)' };
  else if (meta.numGpuBlocks !== undefined) blocks = { value: meta.numGpuBlocks, source: `${META} kv_cache.num_gpu_blocks` };
  else {
    const util = meta.gpuMemoryUtilization ?? VLLM_DEFAULTS.gpuMemoryUtilization;
    const utilFrom = meta.gpuMemoryUtilization !== undefined ? 'kv_cache.gpu_memory_utilization' : "vLLM's default";
    const given = gpuMemoryGiven && kv.gpuBytes !== undefined;
    const gib = given ? kv.gpuBytes! / GIB : meta.deviceTotalMemoryBytes !== undefined ? meta.deviceTotalMemoryBytes / GIB : kv.gpuBytes !== undefined ? kv.gpuBytes / GIB : undefined;
    if (gib === undefined) throw new RangeError(`${run}/${META}: neither kv_cache.num_gpu_blocks nor hardware.device_total_memory_bytes, and profile ${model.bundle.name} was measured on ${model.bundle.hardware}, a GPU whose memory kvpool does not know: give it in GiB (options.gpuMemoryGib), or the KV cache (options.numBlocks)`);
    const memFrom = given ? 'given as options.gpuMemoryGib' : meta.deviceTotalMemoryBytes !== undefined ? 'hardware.device_total_memory_bytes' : `the nominal memory of the profile's GPU (${model.bundle.hardware})`;
    const weights = kv.weightBytes?.(model.bundle.sequence.moe ? dp.value : 1) ?? 0;
    const value = kvCacheBlocks({ bytesPerToken: kv.bytesPerToken, blockSize: blockSize.value, gpuMemoryUtilization: util, gpuMemoryGib: gib, weightBytes: weights }).blocks;
    const f = (x: number) => x.toFixed(2);
    blocks = {
      value,
      source: `derived (meta.json logs no num_gpu_blocks): ${util} (${utilFrom}) x ${f(gib)} GiB (${memFrom}) - ${f(weights / GIB)} GiB of weights - ${DEFAULT_ACTIVATION_RESERVE_GIB} GiB of activations, in blocks of ${blockSize.value} tokens x ${kv.bytesPerToken / 1024} KiB`,
    };
  }
  return {
    tp,
    dp,
    expertParallel,
    maxNumSeqs: required(run, 'max_num_seqs', meta.maxNumSeqs),
    maxNumBatchedTokens: required(run, 'max_num_batched_tokens', meta.maxNumBatchedTokens),
    blockSize,
    numBlocks: blocks,
    kvGibPerGpu: Math.round(((blocks.value * blockBytes) / GIB) * 1000) / 1000,
  };
}
