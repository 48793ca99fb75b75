// kvpool: the KV-cache block manager of an LLM serving engine, with a
// WebAssembly core. This entry is platform-neutral (browsers, workers, Node);
// `kvpool` resolves to index.node.ts under Node, which adds file reading.

export { loadCore, isCoreLoaded, type WasmSource } from './core/instance.js';
export { xxh3_128, hashBlocks } from './hash.js';
export type { BlockManager, BlockManagerStats } from './managers/block-manager.js';
export { BlockManagerImpl, type BlockManagerOptions } from './managers/block-manager-impl.js';
export {
  ConcurrentBlockManagerImpl,
  type ConcurrentBlockManagerOptions,
  type SharedManagerDescriptor,
} from './managers/concurrent-block-manager-impl.js';
export { LockTimeoutError } from './managers/shared-lock.js';
export { SingleBlockManager, type SingleBlockManagerOptions } from './managers/single-block-manager.js';
export { Sequence, type ForkOptions } from './pool/sequence.js';
export type { KVCacheManager, BlockTransferInfo } from './pool/kv-cache-manager.js';
export { BlockManagerPool, type BlockManagerPoolOptions, type PoolRankStats } from './pool/block-manager-pool.js';
export { replay, replaySync, type ReplayOptions } from './replay/replay.js';
export { runReplay, promptTokens, outputToken, type ReplayResult, type ReplayParams, type ReplayTarget, type ReplaySequence } from './replay/kernel.js';
export { parseTrace, parseTraceLine, TraceError, type TraceRequest } from './replay/trace.js';
export { generateWorkload, type WorkloadOptions } from './replay/workload.js';
