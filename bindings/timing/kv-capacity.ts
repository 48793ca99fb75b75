// KV capacity in GiB (docs/timing.md, KV capacity): the bytes a token's K
// and V take on one GPU, the weights a GPU holds, and blocks from either a
// KV size or a share of the GPU's memory, as vLLM sizes its cache.

import { describe } from '../validate.js';
import type { ModelShape } from './profile-bundle.js';

export const GIB = 1024 ** 3;

/** What vLLM keeps besides weights and KV (activations of the profiling run, CUDA graphs, NCCL and cuBLAS workspaces), GiB: an a-priori figure. */
export const DEFAULT_ACTIVATION_RESERVE_GIB = 1.5;

/** Nominal memory of the GPUs of the bundled profiles, GiB (a GPU reports a little less to CUDA). */
export const GPU_MEMORY_GIB: Readonly<Record<string, number>> = Object.freeze({ RTX4090: 24, RTXPRO6000: 96 });

/** KV heads on one GPU at TP `tp` (replicated when there are fewer heads than GPUs, as vLLM does). */
function kvHeadsPerGpu(m: ModelShape, tp: number): number {
  return Math.max(1, Math.floor(m.kvHeads / tp));
}

/** Bytes of one token's K and V, every layer, on one GPU at TP `tp`. */
export function kvBytesPerToken(m: ModelShape, tp = 1): number {
  return 2 * m.layers * kvHeadsPerGpu(m, tp) * m.headDim * m.dtypeBytes;
}

/** Parameters of the model: [not in experts, in the routed experts] (norms left out: a few MB). */
export function parameterCount(m: ModelShape): [number, number] {
  const H = m.hidden;
  const attention = H * m.headDim * (m.heads + 2 * m.kvHeads) + m.heads * m.headDim * H;
  const dense = m.experts > 0 ? H * m.experts : 3 * H * m.intermediate; // a MoE layer keeps its router
  const experts = m.experts * 3 * H * m.expertIntermediate;
  const embeddings = m.vocab * H * (m.tiedEmbeddings ? 1 : 2);
  return [m.layers * (attention + dense) + embeddings, m.layers * experts];
}

/** Bytes of weights on one GPU: the model split over TP, its routed experts over all `tp x dp` GPUs of an engine (expert parallelism). */
export function weightBytesPerGpu(m: ModelShape, tp = 1, dp = 1): number {
  const [shared, experts] = parameterCount(m);
  return (shared / tp + experts / (tp * dp)) * m.dtypeBytes;
}

export interface KvCapacityInput {
  /** Bytes of one token's K and V on one GPU of a dp rank. */
  bytesPerToken: number;
  /** Tokens per block. */
  blockSize: number;
  /** KV cache of each GPU, GiB. */
  kvCacheGib?: number;
  /** Or: the share of each GPU's memory the engine may use (vLLM's gpu_memory_utilization), with the three below. */
  gpuMemoryUtilization?: number;
  gpuMemoryGib?: number;
  /** Weights on one GPU, bytes. */
  weightBytes?: number;
  /** Default DEFAULT_ACTIVATION_RESERVE_GIB. */
  activationReserveGib?: number;
}

export interface KvCapacity {
  /** Blocks per dp rank (what `numBlocks` takes). */
  blocks: number;
  /** KV cache of each GPU those blocks take, GiB. */
  gibPerGpu: number;
  /** GiB each GPU had for KV (before rounding down to whole blocks). */
  availableGib: number;
}

function positiveNumber(name: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) throw new RangeError(`${name} must be a finite number > 0, got ${describe(v)}`);
  return v;
}

/**
 * Blocks of `blockSize` tokens that fit each GPU's KV share: `kvCacheGib`,
 * or `gpuMemoryUtilization x gpuMemoryGib - weights - activation reserve`.
 * Refuses a size that holds no block (naming what took the memory).
 */
export function kvCacheBlocks(o: KvCapacityInput): KvCapacity {
  const perToken = positiveNumber('bytesPerToken', o.bytesPerToken);
  const blockSize = positiveNumber('blockSize', o.blockSize);
  const blockBytes = perToken * blockSize;
  let available: number;
  if (o.kvCacheGib !== undefined) {
    if (o.gpuMemoryUtilization !== undefined) throw new RangeError('kvCacheGib and gpuMemoryUtilization both size the KV cache: give one');
    available = positiveNumber('kvCacheGib', o.kvCacheGib);
  } else if (o.gpuMemoryUtilization !== undefined) {
    const u = o.gpuMemoryUtilization;
    if (typeof u !== 'number' || !(u > 0 && u <= 1)) throw new RangeError(`gpuMemoryUtilization must be in (0, 1], got ${describe(u)}`);
    const mem = positiveNumber('gpuMemoryGib', o.gpuMemoryGib);
    const weights = (o.weightBytes === undefined ? 0 : positiveNumber('weightBytes', o.weightBytes)) / GIB;
    const reserve = o.activationReserveGib ?? DEFAULT_ACTIVATION_RESERVE_GIB;
    if (typeof reserve !== 'number' || !Number.isFinite(reserve) || reserve < 0) throw new RangeError(`activationReserveGib must be a finite number >= 0, got ${describe(reserve)}`);
    available = u * mem - weights - reserve;
    if (available * GIB < blockBytes) {
      throw new RangeError(`gpuMemoryUtilization ${u} of ${mem} GiB leaves ${available.toFixed(2)} GiB for KV after ${weights.toFixed(2)} GiB of weights and ${reserve} GiB of activations: not one block (${(blockBytes / 2 ** 20).toFixed(2)} MiB)`);
    }
  } else throw new TypeError('give kvCacheGib or gpuMemoryUtilization');
  const blocks = Math.floor((available * GIB) / blockBytes);
  if (blocks < 1) throw new RangeError(`kvCacheGib ${available} holds no block of ${blockSize} tokens (${(blockBytes / 2 ** 20).toFixed(2)} MiB each)`);
  return { blocks, gibPerGpu: (blocks * blockBytes) / GIB, availableGib: available };
}
