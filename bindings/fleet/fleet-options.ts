// A fleet's options: replay()'s, for every engine, plus how many engines,
// which router, and the step clock. Parsed once; `config` echoes them.

import { REPLAY_OPTION_KEYS, parseReplayOptions, replayConfig, type ParsedReplayOptions, type ReplayConfig, type ReplayOptions } from '../replay/replay.js';
import { checkInt, checkKeys, checkObject, describe } from '../validate.js';
import { parseWeights } from './prefix-score.js';
import type { Router } from './router.js';
import { kvEcho, kvSizedBlocks, parseTimedOptions, TIMED_KEYS, type TimedFleetOptions, type ParsedTimedOptions, type TimedConfig } from './timed-options.js';
import { ROUTER_POLICIES, type RouterPolicy } from './routers.js';

/** How request arrival is timed: by the trace's `timestamp` (ms), or every request at step 0. */
export type FleetArrival = 'timestamps' | 'instant';

export interface FleetOptions extends ReplayOptions, TimedFleetOptions {
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

/** The default step: 20 ms of trace time. */
export const DEFAULT_STEP_MS = 20;

export interface ParsedFleetOptions {
  replay: ParsedReplayOptions;
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

export interface FleetConfig extends ReplayConfig, Partial<TimedConfig> {
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

export function parseFleetOptions(o: FleetOptions): ParsedFleetOptions {
  checkObject('options', o);
  checkKeys('options', o, [...REPLAY_OPTION_KEYS, ...FLEET_KEYS]);
  const replayOptions: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) if (!(FLEET_KEYS as readonly string[]).includes(k)) replayOptions[k] = v;
  let replay = parseReplayOptions(replayOptions as ReplayOptions);
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
  const timed = parseTimedOptions(o);
  if (timed !== undefined) {
    // The KV cache in GiB (docs/timing.md, KV capacity): the blocks it holds replace numBlocks.
    const blocks = kvSizedBlocks(o, timed.model, replay.blockSize, replay.dpSize);
    if (blocks !== undefined) {
      replayOptions['numBlocks'] = blocks;
      replay = parseReplayOptions(replayOptions as ReplayOptions);
    }
    Object.assign(timed.config, kvEcho(timed.model, replay.numBlocks, replay.blockSize, replay.dpSize));
  }
  const threads = checkInt('options.threads', o.threads ?? 0, 0, 256);
  if (timed !== undefined && threads > 0) throw new RangeError(`options.threads ${threads}: a timed fleet runs in one thread; leave options.threads out`);
  if (timed !== undefined && o.stepMs !== undefined) throw new RangeError('options.stepMs belongs to the step clock; a timed fleet takes its step times from options.timing');
  return {
    replay,
    replayOptions: replayOptions as ReplayOptions,
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

export function fleetConfig(p: ParsedFleetOptions, routerName: string, trace: string | undefined): FleetConfig {
  return {
    ...replayConfig(p.replay, trace),
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
