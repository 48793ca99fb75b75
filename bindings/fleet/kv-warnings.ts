// A note on a KV cache that no GPU of the timing model could hold
// (docs/timing.md, KV capacity). A timed run sized in blocks (the default
// 65,536, or --num-blocks) runs whatever the blocks' bytes; with a profile,
// whose GPU and weights are known, a cache larger than the GPU's memory
// after its weights is a fleet that does not exist, and its latencies flatter
// it (its requests wait for blocks later than a real one's would). It runs; the result's warnings say so.

import type { TimingModel } from '../timing/step-batch.js';

const GIB = 1024 ** 3;
const gib = (bytes: number) => (bytes / GIB).toLocaleString('en-US', { maximumFractionDigits: 2 });

/** The warnings for `numBlocks` blocks of `blockSize` tokens per dp rank, timed by `model`; none when the model does not know its GPU. */
export function kvWarnings(model: TimingModel, numBlocks: number, blockSize: number, dpSize: number): string[] {
  const kv = model.kv;
  if (kv === undefined || kv.gpuBytes === undefined || kv.weightBytes === undefined) return [];
  const kvBytes = numBlocks * blockSize * kv.bytesPerToken;
  const weights = kv.weightBytes(dpSize);
  if (kvBytes + weights <= kv.gpuBytes) return [];
  const room = Math.max(0, kv.gpuBytes - weights);
  return [
    `the KV cache of ${numBlocks.toLocaleString('en-US')} blocks is ${gib(kvBytes)} GiB on each GPU, and with ${gib(weights)} GiB of weights more than the GPU's ${gib(kv.gpuBytes)} GiB ` +
      `(at most ${Math.floor(room / (blockSize * kv.bytesPerToken)).toLocaleString('en-US')} blocks would fit beside the weights, before activations): ` +
      'no such engine exists (a real one holds fewer blocks, and its requests wait and are preempted sooner); size the cache with kvCacheGib or gpuMemoryUtilization (--kv-cache-gib, --gpu-memory-utilization)',
  ];
}
