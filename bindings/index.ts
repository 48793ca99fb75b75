// kvpool: the KV-cache block manager of an LLM serving engine, with a
// WebAssembly core. This entry is platform-neutral (browsers, workers, Node);
// `kvpool` resolves to index.node.ts under Node, which adds file reading.
// Nothing reachable from here may import a Node built-in (test/browser-bundle).

import './wasm-default.js';

export { loadCore, isCoreLoaded, type WasmSource } from './core/plain-core.js';
export { xxh3_128, hashBlocks } from './hash.js';
export type { BlockManager, BlockManagerStats } from './managers/block-manager.js';
export { BlockManagerImpl, type BlockManagerOptions } from './managers/block-manager-impl.js';
export { EVICTION_POLICIES, DEFAULT_PRIORITY, type EvictionPolicy } from './managers/eviction-policy.js';
export type { RetentionRange } from './managers/retention.js';
export {
  ConcurrentBlockManagerImpl,
  type ConcurrentBlockManagerOptions,
  type SharedManagerDescriptor,
} from './managers/concurrent-block-manager-impl.js';
export { LockTimeoutError } from './managers/shared-lock.js';
export { SingleBlockManager, type SingleBlockManagerOptions } from './managers/single-block-manager.js';
export {
  CompositeBlockManager,
  type CompositeBlockManagerOptions,
  type ManagerType,
  type SubManagerKind,
  type SubManagerSpec,
  type SubManagerStats,
} from './managers/composite-block-manager.js';
export { CompositeBlockTables } from './managers/composite-block-tables.js';
export {
  SlidingWindowBlockManager,
  type SlidingWindowBlockManagerOptions,
  type SwaPoolSizing,
  swaBlocksPerSeq,
  swaPoolBlocks,
  outOfWindowBlocks,
} from './managers/sliding-window-block-manager.js';
export {
  XTensorBlockManagerImpl,
  pageBlockRange,
  type XTensorBlockManagerOptions,
  type PageEvent,
} from './managers/xtensor-block-manager-impl.js';
export {
  ConcurrentXTensorBlockManagerImpl,
  type ConcurrentXTensorBlockManagerOptions,
  type SharedXTensorDescriptor,
} from './managers/xtensor-concurrent-block-manager-impl.js';
export type { PoolManager } from './managers/pool-manager.js';
export type { XTensorPoolOptions } from './pool/xtensor-options.js';
export { Sequence, type ForkOptions, type SequenceOptions } from './pool/sequence.js';
export type { KVCacheManager, BlockTransferInfo } from './pool/kv-cache-manager.js';
export { BlockManagerPool, type BlockManagerPoolOptions, type PoolRankStats, type RankBlocks } from './pool/block-manager-pool.js';
export {
  LinearStatePrefixCache, type LinearStatePrefixCacheOptions, type LinearStatePin, type LinearStateReservation,
  type LinearStateReserveResult, type LinearStateCacheOp, type LinearStatePromotion, type ResolvedLinearStateOps,
  type LinearStateStats, type LinearSlotState,
} from './linear-state/linear-state-prefix-cache.js';
export type { LinearStateReuse } from './ranks/linear-state-add-on.js';
export type { LinearStatePoolOptions, CompositePoolOptions } from './pool/pool-options.js';
export {
  HierarchyBlockManagerPool,
  type HierarchyBlockManagerPoolOptions,
  type BlockTransfer,
  type OffloadPlan,
  type RankTransfers,
  type HierarchyRankStats,
} from './pool/hierarchy-block-manager-pool.js';
export {
  PoolReplayTarget, type ReplayOptions, type ReplayRun, type ReplayMode, type ReplayRunBase, type PlainReplayRun,
  type LinearStateReplayRun, type CompositeReplayRun, type HostTierReplayRun, type ReplayConfig, type ReplayRankFigures,
} from './replay/replay.js';
export { replay, replaySync, ENGINES, type Engine, type EngineReplayOptions, type EngineReplayRun, type XllmReplayOptions } from './engines/replay.js';
export {
  UNLIMITED_TOKENS, type VllmReplayOptions, type VllmReplayRun, type VllmReplayConfig,
} from './vllm/replay.js';
export type { VllmRankFigures } from './vllm/replay-loop.js';
export { VllmEngine, stepLine, type VllmStepRecord } from './vllm/engine.js';
export { VllmScheduler, type VllmSchedulerConfig, type VllmRankCounts } from './vllm/scheduler.js';
export { VllmRequest, type VllmRequestStatus } from './vllm/request.js';
export { VllmKvCacheManager, type VllmKvCacheOptions, type VllmKvEvent } from './vllm/kv-cache-manager.js';
export { VllmBlockPool, type VllmPoolStats, type VllmEviction } from './vllm/block-pool.js';
export type { VllmKvCache, VllmKvFigures, VllmPrefixCacheStats } from './vllm/kv-cache.js';
export { vllmMetrics, vllmMetricsText, VLLM_METRICS, type VllmRankMetrics, type VllmMetricsSource } from './vllm/metrics.js';
export { openVllmEngine, type OpenVllmEngine, type VllmEngineSpec } from './vllm/open-engine.js';
export type { SubManagerReplayStats } from './replay/composite-replay.js';
export type { HostTierResult } from './replay/hierarchy-replay.js';
export type {
  KVEvent, BlockStoredEvent, BlockRemovedEvent, AllBlocksClearedEvent, KVCacheGroup, KVCacheSpecKind,
} from './managers/kv-events.js';
export {
  encodeVllmEventBatches, drainVllmEventBatches, kvEventsTopic, type VllmEncodeOptions, type VllmEventFormat, type BlockHashFormat, type EncodedBatch,
} from './events/vllm.js';
export {
  decodeVllmEventBatch, decodeVllmEventBatches, type VllmEventBatch, type VllmEvent, type VllmBlockStored, type VllmBlockRemoved, type VllmAllBlocksCleared, type VllmBlockHash,
} from './events/vllm-decode.js';
export {
  KVEventIndex, DEFAULT_INDEX_LIMITS, type KVEventIndexOptions, type KVEventIndexLimits, type KVEventIndexStats, type PrefixQuery, type PrefixMatch, type IndexedBlock, type IndexedHash, type IndexSourceInfo,
} from './events/kv-event-index.js';
export { replayWithEvents, type ReplayEventSink } from './replay/replay-events.js';
export {
  promptTokens, outputToken, type ReplayResult, type ReplayParams, type ReplayTarget, type ReplaySequence, type ReplayLinearStateResult,
} from './replay/kernel.js';
export { runReplay } from './replay/stepper.js';
export { parseTrace, parseTraceLine, TraceError, type TraceRequest } from './replay/trace.js';
export { generateWorkload, type WorkloadOptions } from './replay/workload.js';
export { ReplayStepper, type ReplayStep } from './replay/stepper.js';
export { fleet, fleetSync, Fleet, arrivalSteps, type FleetEventSink } from './fleet/fleet.js';
export { DEFAULT_STEP_MS, VLLM_FLEET_MAX_NUM_BATCHED_TOKENS, type FleetOptions, type FleetConfig, type FleetArrival, type VllmFleetOptions } from './fleet/fleet-options.js';
export type { FleetRun, FleetEngineFigures, QueueingFigures } from './fleet/fleet-result.js';
export type { EngineRun } from './fleet/step-engine.js';
export { sloSearch, meetsSlo, fewestMeeting, unserved, compareFleetSize, checkSloTargets, SLO_TARGETS, type SloTargets, type SloSearchResult } from './fleet/slo-search.js';
export { FLEET_SCHEDULERS, DEFAULT_MAX_NUM_BATCHED_TOKENS, type FleetScheduler, type TimedScheduler, type TimedFleetOptions, type TimedConfig } from './fleet/timed-options.js';
export { tokenTimesMs, type FleetLatency, type LatencyFigures, type TimedEngineFigures, type RequestTimes } from './fleet/fleet-latency.js';
export { latencyFigures, PERCENTILES } from './fleet/latency-figures.js';
export { arrivalTimes, arrivalOrigin, MAX_CLOCK_MS } from './fleet/timed-fleet.js';
export type { Router, RouteRequest, FleetView } from './fleet/router.js';
export { ROUTER_POLICIES, createRouter, type RouterPolicy, type RouterContext } from './fleet/routers.js';
export { RoundRobinRouter } from './fleet/round-robin.js';
export { LeastLoadedRouter } from './fleet/least-loaded.js';
export { SessionAffinityRouter, AFFINITY_VNODES } from './fleet/session-affinity.js';
export { ApproximatePrefixRouter, type ApproximatePrefixOptions } from './fleet/approximate-prefix.js';
export { PrecisePrefixRouter, engineInstance, type PrecisePrefixOptions } from './fleet/precise-prefix.js';
export type { PrefixScoreWeights } from './fleet/prefix-score.js';
export { BlockState, BLOCK_STATE_NAMES } from './managers/block-state.js';
export {
  timingModel, parseTimingSpec, DEFAULT_TIMING, emptyStepBatch, clearStepBatch, addChunk, addDecode, checkBatch, checkRanks,
  type TimingModel, type TimingSpec, type TimingSpecInput, type StepBatch, type PolynomialTiming, type TableTiming, type ProfileTiming, type KvFacts,
} from './timing/timing-model.js';
export { parseProfileBundle, type ProfileBundle, type ProfileBundleFiles, type ModelShape } from './timing/profile-bundle.js';
export { ProfileModel, type ProfileParameters } from './timing/profile-model.js';
export { profileModel, profileParameters, PROFILE_DEFAULTS } from './timing/profile-spec.js';
export { kvCacheBlocks, kvBytesPerToken, weightBytesPerGpu, parameterCount, GPU_MEMORY_GIB, DEFAULT_ACTIVATION_RESERVE_GIB, type KvCapacity, type KvCapacityInput } from './timing/kv-capacity.js';
export { parseTimingTable } from './timing/timing-table.js';
export { parseCalibration, CALIBRATED_KEYS, type Calibration, type CalibrationRun, type CalibratedKey, type ErrorPair } from './timing/calibration.js';
export {
  parseMeasuredRun, TIMESERIES_COLUMNS, type MeasuredRun, type MeasuredRunFiles, type MeasuredRequest, type MeasuredTick, type MeasuredMeta, type PeerCluster,
} from './measured/run-format.js';
export { parsePeerSummary, type PeerSummary, type RunFigures, type FigureSummary } from './measured/peer-summary.js';
export { measuredFigures, FIGURE_KEYS, STAT_KEYS, type Figure, type Figures, type FigureKey, type StatKey } from './measured/measured-figures.js';
export { VLLM_DEFAULTS, type EngineSettings, type Setting } from './measured/run-settings.js';
export { validateRun, runTrace, VALIDATION_ENGINE, VALIDATION_ENGINE_NAME, type ValidateOptions, type Validation, type TimingSettings } from './measured/validate-run.js';
export type { SeriesPoint } from './measured/series.js';
export { calibrate, type CalibrateRun, type CalibrateOptions } from './measured/calibrate.js';
