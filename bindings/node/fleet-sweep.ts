// `fleetSweep()`: the sweep with a fleet at every grid point -- the replay
// options' grid times a list of routers and of fleet sizes, each point a
// `fleet()` run on the sweep's worker threads (one fleet per thread, its
// engines in that thread), so one report compares policies and fleet sizes.

import { availableParallelism } from 'node:os';
import { parseFleetOptions, type FleetOptions, type ParsedFleetOptions } from '../fleet/fleet-options.js';
import { checkFleetFits } from '../fleet/fleet-memory.js';
import { loadCore } from '../core/plain-core.js';
import type { FleetRun } from '../fleet/fleet-result.js';
import type { RouterPolicy } from '../fleet/routers.js';
import type { FleetScheduler } from '../fleet/timed-options.js';
import type { Engine } from '../engines/replay.js';
import type { ProfileTiming } from '../timing/profile-spec.js';
import { checkInt, checkObject, checkOptionalFunction, describe } from '../validate.js';
import { describeConfig, dispatchOrder, sweepConfigurations, sweepTrace, type SweepGrid, type SweepOptions } from './sweep.js';
import { configurationError, runOnWorkers } from './sweep-pool.js';
import type { SweepJob } from './sweep-worker.js';

/**
 * The fleet axes, varied after (faster than) the replay options: the
 * engine (xllm or vllm), the timed fleet's GPU profile and its TP degree,
 * its KV cache in GiB or share of GPU memory, scheduler, token budget,
 * arrival speed-up and closed-loop concurrency, then fleet size, then router.
 */
export const FLEET_GRID_KEYS = ['engine', 'profile', 'tp', 'kvCacheGib', 'gpuMemoryUtilization', 'scheduler', 'maxNumBatchedTokens', 'speedup', 'concurrency', 'engines', 'router'] as const;
export type FleetGridKey = (typeof FLEET_GRID_KEYS)[number];
/** The axes that name a fleet within a panel of the report: always columns of the table. */
export const FLEET_NAME_KEYS = ['engines', 'router'] as const;
/** The timed fleet's axes (each absent unless given: a step-clock fleet refuses them). */
export const TIMED_GRID_KEYS = ['profile', 'tp', 'kvCacheGib', 'gpuMemoryUtilization', 'scheduler', 'maxNumBatchedTokens', 'speedup', 'concurrency'] as const;

/** Axes that set a field of a profile timing spec (options.timing) rather than an option of their own. */
const PROFILE_AXES = ['profile', 'tp'] as const;

export interface FleetSweepGrid extends SweepGrid {
  /** Engines to compare, each fleet's engines of one kind (docs/engines.md; default: options.engine). */
  engine?: readonly Engine[];
  /** GPU profiles (presets or bundle folders; docs/timing.md): each sets options.timing's profile. */
  profile?: readonly string[];
  /** Tensor-parallel degrees of a profile timing: each sets options.timing's tp. */
  tp?: readonly number[];
  /** KV cache of each GPU, GiB (timed; in place of numBlocks). */
  kvCacheGib?: readonly number[];
  /** Shares of each GPU's memory (timed, with a profile; in place of numBlocks). */
  gpuMemoryUtilization?: readonly number[];
  /** Schedulers (timed fleets; default: options.scheduler). */
  scheduler?: readonly FleetScheduler[];
  /** Token budgets per step (scheduler 'continuous', engine 'vllm'). */
  maxNumBatchedTokens?: readonly number[];
  /** Arrival speed-ups (timed, open loop): the offered load. */
  speedup?: readonly number[];
  /** Closed-loop concurrencies (timed). */
  concurrency?: readonly number[];
  /** Fleet sizes (default [4]). */
  engines?: readonly number[];
  /** Built-in routing policies (default ['round-robin']). */
  router?: readonly RouterPolicy[];
}

export interface FleetSweepOptions extends Omit<SweepOptions, 'grid'>, Omit<FleetOptions, 'onProgress' | 'engines' | 'router' | 'threads'> {
  grid: FleetSweepGrid;
  /**
   * Keep each timed run's token times whole (`latency.requests.stepEndMs`
   * and `tokenSteps`: a number per engine step and per run of a request's
   * tokens, tens of MB on a large trace). Default false: a sweep's runs
   * keep every figure and each request's arrival, admission, first token,
   * finish, tokens and engine, and leave those two lists empty.
   */
  perRequest?: boolean;
}

/** The replay options' part of a fleet grid. */
function replayGridOf(grid: FleetSweepGrid): SweepGrid {
  const replayGrid: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(grid)) if (!(FLEET_GRID_KEYS as readonly string[]).includes(k)) replayGrid[k] = v;
  return replayGrid as SweepGrid;
}

/** The fleet options of every grid point, in order: the replay grid (first key slowest), then the timed axes given, engines, router. */
export function fleetSweepConfigurations(base: Omit<FleetSweepOptions, 'grid' | 'workers' | 'onProgress'>, grid: FleetSweepGrid): FleetOptions[] {
  checkObject('grid', grid);
  const axis = (key: FleetGridKey): readonly unknown[] | undefined => {
    const v = grid[key];
    if (v === undefined) return key === 'engines' ? [4] : key === 'router' ? ['round-robin'] : undefined;
    if (!Array.isArray(v) || v.length === 0) throw new TypeError(`grid.${key} must be a non-empty array, got ${describe(v)}`);
    return v;
  };
  let configs: FleetOptions[] = sweepConfigurations(base, replayGridOf(grid));
  for (const key of FLEET_GRID_KEYS) {
    const values = axis(key);
    if (values === undefined) continue;
    if ((PROFILE_AXES as readonly string[]).includes(key)) {
      configs = configs.flatMap((c) => values.map((v) => ({ ...c, timing: { ...profileSpecOf(c.timing, key), [key]: v } as ProfileTiming })));
    } else configs = configs.flatMap((c) => values.map((v) => ({ ...c, [key]: v })));
  }
  return configs;
}

/** The profile spec a profile axis varies: options.timing's, or a new one when the axis names the profile. */
function profileSpecOf(timing: FleetOptions['timing'], key: string): Omit<ProfileTiming, 'profile'> & { profile?: ProfileTiming['profile'] } {
  if (timing !== null && typeof timing === 'object' && (timing as { kind?: unknown }).kind === 'profile') return timing as ProfileTiming;
  if (key === 'profile' && timing === undefined) return { kind: 'profile' };
  throw new TypeError(`grid.${key} varies a GPU profile: give options.timing of kind "profile"${key === 'tp' ? ' (or grid.profile)' : ''}, not ${describe(timing)}`);
}

/** "numBlocks=4096 engine=vllm speedup=2 engines=8 router=least-loaded": the grid values of one fleet. */
export function describeFleetConfig(c: FleetOptions, grid: FleetSweepGrid): string {
  const value = (k: (typeof TIMED_GRID_KEYS)[number]) => ((PROFILE_AXES as readonly string[]).includes(k) ? (c.timing as Record<string, unknown>)[k] : c[k as keyof FleetOptions]);
  const timed = TIMED_GRID_KEYS.filter((k) => grid[k] !== undefined).map((k) => `${k}=${String(value(k))}`);
  const engine = grid.engine !== undefined ? [`engine=${c.engine ?? 'xllm'}`] : [];
  return [describeConfig(c, replayGridOf(grid)), ...engine, ...timed, `engines=${c.engines} router=${String(c.router)}`].filter((s) => s !== '').join(' ');
}

/** A fleet's value of a grid key as its result's `config` says it: an xllm fleet's config has no `engine` (it is 'xllm'). */
export function configValue(config: object, key: string): unknown {
  const v = (config as Record<string, unknown>)[key];
  return key === 'engine' && v === undefined ? 'xllm' : v;
}

/** Runs a fleet at every grid point on worker threads; the results in `fleetSweepConfigurations` order, each exactly `fleet()`'s. */
export async function fleetSweep(options: FleetSweepOptions): Promise<FleetRun[]> {
  checkObject('options', options);
  const { grid, workers, onProgress, trace, perRequest, ...base } = options;
  checkOptionalFunction('options.onProgress', onProgress);
  if (perRequest !== undefined && typeof perRequest !== 'boolean') throw new TypeError(`options.perRequest must be a boolean, got ${describe(perRequest)}`);
  // A model object's stepMs() cannot be sent to a worker thread; its spec can.
  const timing = (base as FleetOptions).timing;
  if (timing !== null && typeof timing === 'object' && typeof (timing as { stepMs?: unknown }).stepMs === 'function') {
    throw new TypeError('options.timing: a sweep runs on worker threads and cannot take a TimingModel object; give true, a polynomial or a profiled table (a timing spec)');
  }
  const configs = fleetSweepConfigurations(base, grid);
  await loadCore(); // to measure an engine's memory (checkFleetFits)
  const parsed = configs.map((c, i) => {
    try {
      const p = parseFleetOptions(c);
      checkFleetFits(p, true); // each fleet runs whole on one worker thread
      return p;
    } catch (e) {
      throw configurationError(e, i, configs.length, describeFleetConfig(c, grid));
    }
  });
  const n = workers === undefined ? availableParallelism() : checkInt('options.workers', workers, 1, 256);
  const { requests, traceName } = await sweepTrace(trace, parsed.map((p) => p.replay.limit));
  const lengths = parsed.map((p) => Math.min((requests ?? { length: p.replay.requests }).length, p.replay.limit ?? Infinity));
  const jobs: SweepJob[] = configs.map((options, id) => ({ id, kind: 'fleet', options, traceName, tokenTimes: perRequest === true }));
  return runOnWorkers<FleetRun>({ jobs, lengths, order: fleetOrder(parsed), workers: n, requests, onProgress, describe: (id) => describeFleetConfig(configs[id]!, grid) });
}

/**
 * Longest first: precise-prefix asks every engine's pool per request, the
 * approximate router scores every engine's index, the others are cheap;
 * within a router, the replay's own estimate (`dispatchOrder`).
 */
function fleetOrder(parsed: readonly ParsedFleetOptions[]): number[] {
  const replayRank = new Array<number>(parsed.length);
  dispatchOrder(parsed.map((p) => p.replay)).forEach((id, i) => (replayRank[id] = i));
  const router = (p: ParsedFleetOptions) => (p.router === 'precise-prefix' ? 4 : p.router === 'approximate-prefix' ? 2 : 1) * p.engines;
  return parsed.map((p, i) => ({ i, c: router(p) })).sort((a, b) => b.c - a.c || replayRank[a.i]! - replayRank[b.i]!).map((x) => x.i);
}
