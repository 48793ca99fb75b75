// `sweep()`: the replay over a grid of configurations, run in parallel on
// worker threads (one per core by default). The trace is read once and
// handed to every worker; results come back in grid order.

import { availableParallelism } from 'node:os';
import { parseReplayOptions, type ParsedReplayOptions, type ReplayOptions, type ReplayRun } from '../replay/replay.js';
import type { TraceRequest } from '../replay/trace.js';
import { checkInt, checkKeys, checkObject, checkOptionalFunction, describe } from '../validate.js';
import { readTraceFile } from './trace-file.js';
import { configurationError, runOnWorkers, type SweepProgress } from './sweep-pool.js';
import type { SweepJob } from './sweep-worker.js';

/** Options a sweep can vary: each takes a list of values. */
export const SWEEP_GRID_KEYS = [
  'numBlocks', 'blockSize', 'dpSize', 'maxRunning', 'seed', 'eviction', 'hostBlocks', 'storeBlocks', 'slidingWindow', 'linearStateSlots',
] as const;
export type SweepGridKey = (typeof SWEEP_GRID_KEYS)[number];
export type SweepGrid = { [K in SweepGridKey]?: ReadonlyArray<NonNullable<ReplayOptions[K]>> };

export type { SweepProgress };

export interface SweepOptions extends Omit<ReplayOptions, 'onProgress'> {
  /** The values of each option to combine (every combination is one replay, the first key varying slowest). */
  grid: SweepGrid;
  /** Worker threads (default: one per core, at most one per configuration). */
  workers?: number;
  onProgress?: (p: SweepProgress) => void;
}

/** The replay options of every configuration of the grid, in order (the first grid key varies slowest). */
export function sweepConfigurations(base: Omit<SweepOptions, 'grid' | 'workers' | 'onProgress'>, grid: SweepGrid): ReplayOptions[] {
  checkObject('grid', grid);
  checkKeys('grid', grid, SWEEP_GRID_KEYS as unknown as string[]);
  let configs: ReplayOptions[] = [{ ...base }];
  for (const key of SWEEP_GRID_KEYS) {
    const values = grid[key];
    if (values === undefined) continue;
    if (!Array.isArray(values) || values.length === 0) throw new TypeError(`grid.${key} must be a non-empty array, got ${describe(values)}`);
    configs = configs.flatMap((c) => values.map((v) => ({ ...c, [key]: v })));
  }
  return configs;
}

/** Replays every configuration of the grid on worker threads; the results in `sweepConfigurations` order. */
export async function sweep(options: SweepOptions): Promise<ReplayRun[]> {
  checkObject('options', options);
  const { grid, workers, onProgress, trace, ...base } = options;
  checkOptionalFunction('options.onProgress', onProgress);
  const configs = sweepConfigurations(base, grid);
  // Every configuration is checked before anything runs.
  const parsed = configs.map((c, i) => {
    try {
      return parseReplayOptions(c);
    } catch (e) {
      throw configurationError(e, i, configs.length, describeConfig(c, grid));
    }
  });
  const n = workers === undefined ? availableParallelism() : checkInt('options.workers', workers, 1, 256);
  const { requests, traceName } = await sweepTrace(trace, parsed.map((p) => p.limit));
  const lengths = parsed.map((p) => Math.min((requests ?? { length: p.requests }).length, p.limit ?? Infinity));
  const jobs: SweepJob[] = configs.map((options, id) => ({ id, kind: 'replay', options, traceName }));
  return runOnWorkers<ReplayRun>({ jobs, lengths, order: dispatchOrder(parsed), workers: n, requests, onProgress, describe: (id) => describeConfig(configs[id]!, grid) });
}

/** The trace every worker gets: a file or built-in trace read once (up to the longest limit), the caller's requests, or null (the generated workload). */
export async function sweepTrace(trace: ReplayOptions['trace'], limits: ReadonlyArray<number | undefined>): Promise<{ requests: readonly TraceRequest[] | null; traceName: string | undefined }> {
  if (typeof trace === 'string') return { requests: await readTraceFile(trace, limits.reduce<number>((m, l) => Math.max(m, l ?? Infinity), 0)), traceName: trace };
  if (trace === undefined) return { requests: null, traceName: undefined };
  if (!Array.isArray(trace)) throw new TypeError(`options.trace must be a trace name or an array of requests, got ${describe(trace)}`);
  return { requests: trace, traceName: undefined };
}

/**
 * The order configurations are handed to workers: the probably longest first
 * (measured on the conversation trace: half the block size is ~1.4x the
 * time, lfu ~1.7x and priority ~2x lru's, a host tier adds copies), so no
 * long run is left alone at the end.
 */
export function dispatchOrder(parsed: readonly ParsedReplayOptions[]): number[] {
  const policy = { lru: 1, lfu: 1.7, priority: 2 };
  const cost = (p: ParsedReplayOptions) => policy[p.eviction] * (p.hostBlocks > 0 ? 1.5 : 1) / Math.sqrt(p.blockSize);
  return parsed.map((p, i) => ({ i, c: cost(p) })).sort((a, b) => b.c - a.c || a.i - b.i).map((x) => x.i);
}

/** "numBlocks=4096 eviction=lfu": the grid values of one configuration. */
export function describeConfig(c: ReplayOptions, grid: SweepGrid): string {
  return SWEEP_GRID_KEYS.filter((k) => grid[k] !== undefined).map((k) => `${k}=${String(c[k])}`).join(' ');
}

