// A fleet's options: replay()'s, for every engine, plus how many engines,
// which router, and the step clock. Parsed once; `config` echoes them. The
// engine (`engine: 'xllm' | 'vllm'`) is chosen as replay() chooses it, and
// its options are checked by the same rules (bindings/engines/replay.ts,
// bindings/vllm/replay.ts): vLLM's names where they mean the same, the
// options one engine does not have refused by name with the reason.

import { engineOf, xllmOptions, type Engine, type XllmReplayOptions } from '../engines/replay.js';
import { REPLAY_OPTION_KEYS, parseReplayOptions, replayConfig, type ParsedReplayOptions, type ReplayConfig, type ReplayOptions } from '../replay/replay.js';
import { checkInt, checkKeys, checkObject, describe } from '../validate.js';
import { parseVllmReplayOptions, type ParsedVllmReplayOptions, type VllmReplayOptions } from '../vllm/replay.js';
import { parseWeights } from './prefix-score.js';
import type { Router } from './router.js';
import { DEFAULT_MAX_NUM_BATCHED_TOKENS, kvEcho, kvSizedBlocks, parseTimedOptions, TIMED_KEYS, type TimedFleetOptions, type ParsedTimedOptions, type TimedConfig } from './timed-options.js';
import { ROUTER_POLICIES, type RouterPolicy } from './routers.js';

/** How request arrival is timed: by the trace's `timestamp` (ms), or every request at step 0. */
export type FleetArrival = 'timestamps' | 'instant';

/** The vLLM engine's options a fleet takes besides replay()'s (`maxNumBatchedTokens` is among the timed ones). */
export interface VllmFleetOptions {
  /** `maxRunning` under vLLM's name: requests running at once (the vllm engine: per dp rank). */
  maxNumSeqs?: number;
  /** `numBlocks` under vLLM's name. */
  numGpuBlocksOverride?: number;
  /** vllm: a prefill's tokens per step at most (vLLM's long_prefill_token_threshold; default 0: no cap). */
  longPrefillTokenThreshold?: number;
  /** vllm: admit a request only if blocks for all its tokens fit (vLLM's scheduler_reserve_full_isl; default true). */
  schedulerReserveFullIsl?: boolean;
}

export interface FleetOptions extends ReplayOptions, TimedFleetOptions, VllmFleetOptions {
  /**
   * Each engine's cache and scheduler (docs/engines.md): 'xllm' (the
   * default: a BlockManagerPool under the replay kernel) or 'vllm' (vLLM
   * v1's scheduler and block pool, dp ranks in lockstep).
   */
  engine?: Engine;
  /** Engines, each a pool of replay()'s options (default 4). */
  engines?: number;
  /** A built-in policy or your own Router (default 'round-robin'). */
  router?: RouterPolicy | Router;
  /** Milliseconds of trace time per step (default 20, about one decode iteration of a busy engine). */
  stepMs?: number;
  /** Default 'timestamps'. */
  arrival?: FleetArrival;
  /** Prefix routers: weight of the matched share of the prompt (integer 0-1000, default 1). */
  prefixWeight?: number;
  /** Prefix routers: weight of the load share of the slots (integer 0-1000, default 1). */
  loadWeight?: number;
  /** Session affinity: hash the key of this block (1-based; fewer full blocks: the last) (default 1). */
  affinityBlocks?: number;
  /**
   * Node's `fleet()` only: run the engines on this many worker threads (in
   * contiguous groups), the router in this thread; 0 (the default) runs
   * everything here. The results are the same.
   */
  threads?: number;
}

export const FLEET_KEYS = ['engines', 'router', 'stepMs', 'arrival', 'prefixWeight', 'loadWeight', 'affinityBlocks', 'threads', ...TIMED_KEYS] as const;

/** The engine choice and vLLM's option names, beside replay()'s keys. */
export const ENGINE_KEYS = ['engine', 'maxNumSeqs', 'numGpuBlocksOverride', 'longPrefillTokenThreshold', 'schedulerReserveFullIsl'] as const;

/** The default step: 20 ms of trace time. */
export const DEFAULT_STEP_MS = 20;

export interface ParsedFleetOptions {
  engine: Engine;
  /**
   * The engines' geometry and trace options (blockSize, numBlocks, dpSize,
   * maxRunning, seed, limit, requests) for either engine; the xllm engine's
   * whole configuration.
   */
  replay: ParsedReplayOptions;
  /** engine 'vllm': its options, as replay({ engine: 'vllm' }) parses them (the fleet's default token budget filled in). */
  vllm: ParsedVllmReplayOptions | undefined;
  /** replay()'s own options (the fleet's removed). */
  replayOptions: ReplayOptions;
  engines: number;
  router: RouterPolicy | Router;
  stepMs: number;
  arrival: FleetArrival;
  prefixWeight: number;
  loadWeight: number;
  affinityBlocks: number;
  threads: number;
  /** Set when the run keeps time in milliseconds (docs/fleet-time.md); undefined on the step clock. */
  timed: ParsedTimedOptions | undefined;
}

/** The xllm engine's modes, echoed only by an xllm fleet (the vllm engine has none of them). */
export type XllmConfigKey = 'publishAfterPrefill' | 'eviction' | 'hostBlocks' | 'storeBlocks' | 'slidingWindow' | 'compressRatios' | 'linearStateSlots';

export interface FleetConfig extends Omit<ReplayConfig, XllmConfigKey>, Partial<Pick<ReplayConfig, XllmConfigKey>>, Partial<TimedConfig> {
  /** 'vllm' for a fleet of vLLM engines; absent for xllm (whose configuration is what it always was). */
  engine?: 'vllm';
  /** vllm: a prefill's tokens per step at most (0: no cap). */
  longPrefillTokenThreshold?: number;
  /** vllm: a request is admitted only if blocks for all its tokens fit. */
  schedulerReserveFullIsl?: boolean;
  engines: number;
  /** The router's name (a built-in policy's, or your Router's `name`). */
  router: string;
  /** The step clock's step; absent on the millisecond clock, where a step lasts what the timing model says. */
  stepMs?: number;
  arrival: FleetArrival;
  prefixWeight: number;
  loadWeight: number;
  affinityBlocks: number;
}

/** The vLLM engine's token budget in a fleet: vLLM's serving default, as scheduler 'continuous' (docs/fleet-time.md, the vllm engine). */
export const VLLM_FLEET_MAX_NUM_BATCHED_TOKENS = DEFAULT_MAX_NUM_BATCHED_TOKENS;

/** The engine's options (replay()'s keys and vLLM's names), parsed by that engine's own rules. */
function parseEngineOptions(engine: Engine, o: Record<string, unknown>, maxNumBatchedTokens: number | undefined): { replay: ParsedReplayOptions; vllm: ParsedVllmReplayOptions | undefined } {
  if (engine === 'xllm') return { replay: parseReplayOptions(xllmOptions(o as XllmReplayOptions)), vllm: undefined };
  const vllm = parseVllmReplayOptions({ ...o, engine: 'vllm', maxNumBatchedTokens: maxNumBatchedTokens ?? VLLM_FLEET_MAX_NUM_BATCHED_TOKENS } as VllmReplayOptions);
  // The geometry routers, memory checks and figures read, from the same values.
  const replay = parseReplayOptions({
    blockSize: vllm.blockSize, numBlocks: vllm.numBlocks, dpSize: vllm.dpSize, maxRunning: vllm.maxNumSeqs, seed: vllm.seed, requests: vllm.requests,
    ...(vllm.limit !== undefined && { limit: vllm.limit }), ...(o['onProgress'] !== undefined && { onProgress: o['onProgress'] as ReplayOptions['onProgress'] }),
  });
  return { replay, vllm };
}

export function parseFleetOptions(o: FleetOptions): ParsedFleetOptions {
  checkObject('options', o);
  const engine = engineOf(o);
  checkKeys('options', o, [...REPLAY_OPTION_KEYS, ...ENGINE_KEYS, ...FLEET_KEYS]);
  const replayOptions: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) if (!(FLEET_KEYS as readonly string[]).includes(k) && k !== 'engine') replayOptions[k] = v;
  if (engine === 'vllm') {
    if (o.scheduler !== undefined) throw new RangeError(`options.scheduler ${describe(o.scheduler)} cannot be used with engine 'vllm': the vllm engine brings its own scheduler; to keep time in milliseconds give options.timing (true for the default model)`);
    if (o.threads !== undefined && o.threads !== 0) throw new RangeError(`options.threads ${describe(o.threads)} cannot be used with engine 'vllm': a fleet of vLLM engines runs in one thread`);
  }
  const vllmBudget = engine === 'vllm' ? o.maxNumBatchedTokens : undefined;
  let { replay, vllm } = parseEngineOptions(engine, replayOptions, vllmBudget);
  const router = o.router ?? 'round-robin';
  if (typeof router === 'string') {
    if (!(ROUTER_POLICIES as readonly string[]).includes(router)) throw new RangeError(`options.router must be one of ${ROUTER_POLICIES.join(', ')} or a Router, got ${describe(router)}`);
  } else if (router === null || typeof router !== 'object' || typeof (router as Router).route !== 'function' || typeof (router as Router).name !== 'string') {
    throw new TypeError(`options.router must be a policy name or an object with name and route(), got ${describe(router)}`);
  }
  const stepMs = o.stepMs ?? DEFAULT_STEP_MS;
  if (typeof stepMs !== 'number' || !Number.isFinite(stepMs) || stepMs <= 0) throw new RangeError(`options.stepMs must be a finite number > 0, got ${describe(stepMs)}`);
  const arrival = o.arrival ?? 'timestamps';
  if (arrival !== 'timestamps' && arrival !== 'instant') throw new RangeError(`options.arrival must be "timestamps" or "instant", got ${describe(arrival)}`);
  const w = parseWeights(o);
  const timed = parseTimedOptions(o, engine, vllm?.maxNumBatchedTokens);
  if (timed !== undefined) {
    // The KV cache in GiB (docs/timing.md, KV capacity): the blocks it holds replace numBlocks.
    const blocks = kvSizedBlocks({ ...o, numBlocks: o.numBlocks ?? o.numGpuBlocksOverride }, timed.model, replay.blockSize, replay.dpSize);
    if (blocks !== undefined) {
      replayOptions['numBlocks'] = blocks;
      ({ replay, vllm } = parseEngineOptions(engine, replayOptions, vllmBudget));
    }
    Object.assign(timed.config, kvEcho(timed.model, replay.numBlocks, replay.blockSize, replay.dpSize));
  }
  const threads = checkInt('options.threads', o.threads ?? 0, 0, 256);
  if (timed !== undefined && threads > 0) throw new RangeError(`options.threads ${threads}: a timed fleet runs in one thread; leave options.threads out`);
  if (timed !== undefined && o.stepMs !== undefined) throw new RangeError('options.stepMs belongs to the step clock; a timed fleet takes its step times from options.timing');
  return {
    engine,
    replay,
    vllm,
    replayOptions: (engine === 'xllm' ? xllmOptions(replayOptions as XllmReplayOptions) : { onProgress: o.onProgress }) as ReplayOptions,
    engines: checkInt('options.engines', o.engines ?? 4, 1, 4096),
    router,
    stepMs,
    arrival,
    ...w,
    affinityBlocks: checkInt('options.affinityBlocks', o.affinityBlocks ?? 1, 1),
    threads,
    timed,
  };
}

/** The engine's part of `config`: replay()'s echo for xllm; for vllm its geometry and vLLM's scheduler options. */
function engineConfig(p: ParsedFleetOptions, trace: string | undefined): Omit<FleetConfig, 'engines' | 'router' | 'arrival' | 'prefixWeight' | 'loadWeight' | 'affinityBlocks'> {
  const c = replayConfig(p.replay, trace);
  const v = p.vllm;
  if (v === undefined) return c;
  const { publishAfterPrefill: _a, eviction: _b, hostBlocks: _c, storeBlocks: _d, slidingWindow: _e, compressRatios: _f, linearStateSlots: _g, ...common } = c;
  return {
    ...common,
    engine: 'vllm',
    maxNumBatchedTokens: v.maxNumBatchedTokens,
    longPrefillTokenThreshold: v.longPrefillTokenThreshold,
    schedulerReserveFullIsl: v.reserveFullIsl,
  };
}

export function fleetConfig(p: ParsedFleetOptions, routerName: string, trace: string | undefined): FleetConfig {
  return {
    ...engineConfig(p, trace),
    engines: p.engines,
    router: routerName,
    ...(p.timed === undefined && { stepMs: p.stepMs }),
    arrival: p.arrival,
    prefixWeight: p.prefixWeight,
    loadWeight: p.loadWeight,
    affinityBlocks: p.affinityBlocks,
    ...(p.timed !== undefined && p.timed.config),
  };
}
