// The capacity question a timed fleet answers (docs/fleet.md, the SLO
// answer): how few engines keep the 99th-percentile TTFT, time per output
// token and inter-token latency under their targets? Tried in ascending order of engine count,
// stopping at the first that meets every target -- exact whatever the
// shape of the curve, since no count below it was skipped. Before the
// first run, the TTFT floor (slo-floor.ts) may show that no count can meet
// a TTFT target: then only the largest count runs, for its figures.

import { checkInt, checkObject, describe } from '../validate.js';
import { traceArg } from '../replay/replay.js';
import { checkRequests } from '../replay/stepper.js';
import { generateWorkload } from '../replay/workload.js';
import { fleetSync } from './fleet.js';
import { fleetConfig, parseFleetOptions, type FleetOptions } from './fleet-options.js';
import type { FleetRun } from './fleet-result.js';
import { floorReason } from './slo-floor.js';

/** p99 targets in milliseconds; at least one. */
export interface SloTargets {
  /** latency.ttftMs.p99 (time to first token) must not exceed this. */
  ttftMs?: number;
  /** latency.tpotMs.p99 (each request's mean time per output token after the first) must not exceed this. */
  tpotMs?: number;
  /** latency.itlMs.p99 (every gap between consecutive tokens) must not exceed this. */
  itlMs?: number;
}

/** The targets an SLO may set, in the order they are said. */
export const SLO_TARGETS = ['ttftMs', 'tpotMs', 'itlMs'] as const;

export interface SloSearchResult {
  /** The fewest engines whose run meets every target; null: none of the counts tried. */
  engines: number | null;
  /** Every run made, in ascending engine count (the last meets the targets when `engines` is set). */
  runs: FleetRun[];
  /**
   * Set when the TTFT floor showed, before any run, that no engine count
   * can meet the targets ("no fleet can meet it: ..."): then `engines` is
   * null and `runs` holds only the largest count's run.
   */
  why?: string;
  /** Engine counts not run because `why` rules them out (0 unless `why` is set). */
  skipped: number;
}

/** The targets, checked: an object of finite numbers > 0 under known names, at least one given. */
export function checkSloTargets(slo: SloTargets): SloTargets {
  checkObject('slo', slo);
  if (Array.isArray(slo)) throw new TypeError(`slo must be an object of targets ({ ${SLO_TARGETS.join(', ')} }), got ${describe(slo)}`);
  for (const [k, v] of Object.entries(slo)) {
    if (!(SLO_TARGETS as readonly string[]).includes(k)) throw new RangeError(`slo: unknown target ${JSON.stringify(k)} (${SLO_TARGETS.join(', ')})`);
    if (v === undefined) continue;
    if (typeof v !== 'number') throw new TypeError(`slo.${k} must be a number of ms, got ${describe(v)}`);
    if (!Number.isFinite(v) || v <= 0) throw new RangeError(`slo.${k} must be a finite number > 0, got ${describe(v)}`);
  }
  if (SLO_TARGETS.every((k) => slo[k] === undefined)) throw new RangeError(`slo: give at least one target (${SLO_TARGETS.join(', ')})`);
  return slo;
}

/** Requests a run did not serve in full: rejected, truncated, or finished early by the kernel to make room. */
export function unserved(run: FleetRun): { rejected: number; truncated: number; finishedEarly: number } {
  return { rejected: run.rejected, truncated: run.truncated, finishedEarly: run.finishedEarly };
}

/** Whether a checked run meets checked targets. */
function meets(run: FleetRun, slo: SloTargets): boolean {
  const l = run.latency;
  if (l === undefined) throw new RangeError('an SLO needs a timed fleet run (options.timing or scheduler "continuous")');
  const u = unserved(run);
  if (u.rejected > 0 || u.truncated > 0 || u.finishedEarly > 0) return false;
  // Served in full: every request gave a token (none is missing from the figures).
  if (l.completed !== run.requests) return false;
  return SLO_TARGETS.every((k) => slo[k] === undefined || l[k].p99 <= slo[k]);
}

/**
 * Whether a timed run served every request in full within the targets: none
 * rejected, truncated or finished early (a request cut short has no or
 * fewer tokens in the percentiles, so a fleet too small to serve the trace
 * would otherwise look fast), every one with its first token, and p99 TTFT,
 * TPOT and ITL within the targets given. The targets are checked as
 * sloSearch checks them. A step-clock run has no latency to judge.
 */
export function meetsSlo(run: FleetRun, slo: SloTargets): boolean {
  return meets(run, checkSloTargets(slo));
}

/** Which of two fleets is smaller: fewer engines, then fewer blocks per rank (negative: a). */
export function compareFleetSize(a: FleetRun, b: FleetRun): number {
  return a.config.engines - b.config.engines || a.config.numBlocks - b.config.numBlocks;
}

/**
 * Of runs already made (a sweep's), the smallest fleet that meets the
 * targets: the fewest engines, and of those the smallest cache (blocks per
 * rank); a tie: the first. Null: none meets them.
 */
export function fewestMeeting(runs: readonly FleetRun[], slo: SloTargets): FleetRun | null {
  checkSloTargets(slo);
  if (!Array.isArray(runs)) throw new TypeError(`runs must be an array of fleet runs, got ${describe(runs)}`);
  let best: FleetRun | null = null;
  for (const r of runs) if (meets(r, slo) && (best === null || compareFleetSize(r, best) < 0)) best = r;
  return best;
}

/**
 * Why no engine count can meet `slo` with these options, known before any
 * run from the trace and the timing model alone (slo-floor.ts); undefined:
 * some count may, or the fleet is not timed (its first run refuses it).
 */
function unmeetable(options: FleetOptions, slo: SloTargets, engines: number): string | undefined {
  if (slo.ttftMs === undefined) return undefined;
  const p = parseFleetOptions({ ...options, engines });
  if (p.timed === undefined) return undefined;
  const trace = traceArg(options) ?? generateWorkload({ requests: p.replay.requests, seed: p.replay.seed });
  checkRequests(trace, p.replay.limit);
  const n = Math.min(trace.length, p.replay.limit ?? Infinity);
  return floorReason(fleetConfig(p, '', undefined), trace, n, p.timed.model, slo);
}

/**
 * Runs `options` (a timed fleet; its `engines` is ignored) at each engine
 * count, smallest first, until one meets every target. `engineCounts`: a
 * list, or N for 1..N. Synchronous: the core must be loaded (as for
 * fleetSync; `await fleet({})` or Node's entry loads it). Returns the
 * fewest engines that meet the targets (null: none tried) and every run
 * made. When the TTFT floor shows no count can meet a TTFT target, only
 * the largest count runs (the answer is the one the full search gives)
 * and `why` says so.
 */
export function sloSearch(options: FleetOptions, slo: SloTargets, engineCounts: number | readonly number[], traceName?: string): SloSearchResult {
  checkSloTargets(slo);
  const counts = typeof engineCounts === 'number' ? Array.from({ length: checkInt('engineCounts', engineCounts, 1, 4096) }, (_, i) => i + 1) : engineCounts;
  if (!Array.isArray(counts) || counts.length === 0) throw new TypeError(`engineCounts must be a number or a non-empty array of engine counts, got ${describe(engineCounts)}`);
  const ascending = [...new Set(counts.map((c, i) => checkInt(`engineCounts[${i}]`, c, 1, 4096)))].sort((a, b) => a - b);
  const largest = ascending[ascending.length - 1]!;
  const why = unmeetable(options, slo, largest);
  if (why !== undefined) {
    // The floor's p99 is never above a run's p99 TTFT under a model whose step time grows with its batch, as the
    // built-in ones do: every smaller count would miss too. A model of one's own that does not can beat the floor;
    // its largest fleet meeting the targets shows it, and then the search runs in full, as if no floor were known.
    const run = fleetSync({ ...options, engines: largest }, traceName);
    if (!meets(run, slo)) return { engines: null, runs: [run], why, skipped: ascending.length - 1 };
  }
  const runs: FleetRun[] = [];
  for (const engines of ascending) {
    const run = fleetSync({ ...options, engines }, traceName);
    runs.push(run);
    if (meets(run, slo)) return { engines, runs, skipped: 0 };
  }
  return { engines: null, runs, skipped: 0 };
}
