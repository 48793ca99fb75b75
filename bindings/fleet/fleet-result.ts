// What a fleet run reports (docs/fleet.md, metrics), and the figures made
// from the raw counts: hit rates, queueing percentiles, load imbalance.

import type { EngineRun } from './step-engine.js';
import type { FleetConfig } from './fleet-options.js';
import type { FleetLatency } from './fleet-latency.js';

/** Queueing delay, in steps, from arrival to admission (rejected requests included). */
export interface QueueingFigures {
  meanSteps: number;
  /** Nearest-rank percentiles: the ceil(p/100 * n)-th smallest delay. */
  p50Steps: number;
  p99Steps: number;
  maxSteps: number;
}

export interface FleetEngineFigures {
  engine: number;
  /** Requests routed to it. */
  requests: number;
  rejected: number;
  promptBlocks: number;
  matchedBlocks: number;
  hitRate: number;
  evictedBlocks: number;
  idChecksum: number;
  /** Sequences the kernel finished while they still decoded, to make room after a failed allocation (vllm: requests dropped after giving tokens). */
  finishedEarly: number;
  /** The engine's whole replay result, as replay() reports one for its engine (a VllmReplayRun for engine 'vllm'). */
  run: EngineRun;
}

export interface FleetRun {
  config: FleetConfig;
  requests: number;
  rejected: number;
  truncated: number;
  /**
   * engines[].finishedEarly summed: requests cut short while they still
   * decoded (xllm's kernel finished them to make room after a failed
   * allocation; scheduler 'continuous' and engine 'vllm': the truncated
   * requests, so the same as `truncated`).
   */
  finishedEarly: number;
  promptBlocks: number;
  matchedBlocks: number;
  /** matchedBlocks / promptBlocks over the fleet, rounded to 1e-6. */
  hitRate: number;
  evictedBlocks: number;
  /** The first step at which every request had arrived and none ran or waited (the run took steps 0 to steps - 1). */
  steps: number;
  queueing: QueueingFigures;
  /**
   * K * sum over steps of max_e load(e) / sum over steps of sum_e load(e),
   * load = running + queued after the step's admissions: 1 when the engines
   * always carry equal loads, K when one engine carries all; 1 for a fleet never loaded.
   */
  loadImbalance: number;
  engines: FleetEngineFigures[];
  /** Timed runs only (options.timing or scheduler 'continuous'): the millisecond figures (docs/fleet-time.md). */
  latency?: FleetLatency;
  warnings: string[];
}

/** a / b rounded to 1e-6 (0 when b is 0), as the replay's hit rate. */
export function ratio6(a: number, b: number): number {
  return b === 0 ? 0 : Math.round((a / b) * 1e6) / 1e6;
}

export function queueingFigures(delays: readonly number[]): QueueingFigures {
  const n = delays.length;
  if (n === 0) return { meanSteps: 0, p50Steps: 0, p99Steps: 0, maxSteps: 0 };
  const sorted = Float64Array.from(delays).sort();
  let sum = 0;
  for (const d of delays) sum += d;
  const rank = (p: number) => sorted[Math.max(0, Math.ceil((p / 100) * n) - 1)]!;
  return { meanSteps: ratio6(sum, n), p50Steps: rank(50), p99Steps: rank(99), maxSteps: sorted[n - 1]! };
}

export function engineFigures(engine: number, run: EngineRun, finishedEarly: number): FleetEngineFigures {
  return {
    engine,
    requests: run.requests,
    rejected: run.rejected,
    promptBlocks: run.promptBlocks,
    matchedBlocks: run.matchedBlocks,
    hitRate: run.hitRate,
    evictedBlocks: run.evictedBlocks,
    idChecksum: run.idChecksum,
    finishedEarly,
    run,
  };
}

/** Plain-language notes on a result that is probably not what was meant. */
export function fleetWarnings(r: Omit<FleetRun, 'warnings'>): string[] {
  const out: string[] = [];
  if (r.requests === 0) out.push('nothing was replayed: the trace has no requests (or the limit is 0)');
  else if (r.rejected > 0) out.push(`${r.rejected} of ${r.requests} requests were rejected: their prompt needs more blocks than an engine's rank has`);
  if (r.truncated > 0) out.push(`${r.truncated} requests stopped decoding early for lack of blocks (counted as truncated)`);
  // Only xLLM's kernel finishes requests early other than by truncating them (elsewhere the two counts are the same requests).
  const kernel = r.config.engine === undefined && r.config.scheduler !== 'continuous';
  if (kernel && r.finishedEarly > 0) {
    out.push(
      `${r.finishedEarly} requests stopped decoding early: an engine's pool ran out of blocks and the kernel finished them while they still decoded, to make room ` +
        '(counted as finished early; more blocks or fewer running requests avoid it: numBlocks or maxRunning, --num-blocks or --max-running)',
    );
  }
  const idle = r.engines.filter((e) => e.requests === 0).length;
  if (idle > 0 && r.requests >= r.engines.length) out.push(`${idle} of ${r.engines.length} engines were sent no request by the router`);
  return out;
}

/** The fleet's result from its engines' figures and the run's sums (docs/fleet.md, the result). */
export function assembleRun(
  config: FleetConfig, n: number, perEngine: FleetEngineFigures[], delays: readonly number[], lastStep: number, sumMax: number, sumLoad: number,
): FleetRun {
  const K = perEngine.length;
  const sum = (f: (x: FleetEngineFigures) => number) => perEngine.reduce((a, x) => a + f(x), 0);
  const promptBlocks = sum((x) => x.promptBlocks);
  const matchedBlocks = sum((x) => x.matchedBlocks);
  const run: Omit<FleetRun, 'warnings'> = {
    config,
    requests: n,
    rejected: sum((x) => x.rejected),
    truncated: sum((x) => x.run.truncated),
    finishedEarly: sum((x) => x.finishedEarly),
    promptBlocks,
    matchedBlocks,
    hitRate: ratio6(matchedBlocks, promptBlocks),
    evictedBlocks: sum((x) => x.evictedBlocks),
    steps: lastStep,
    queueing: queueingFigures(delays),
    loadImbalance: sumLoad === 0 ? 1 : ratio6(K * sumMax, sumLoad),
    engines: perEngine,
  };
  return { ...run, warnings: fleetWarnings(run) };
}
