// The flags that put a fleet on the millisecond clock (docs/fleet.md, time),
// shared by `kvpool fleet` and fleet sweeps, and the SLO targets they answer
// to. None has a default: each is passed to the library only when given, so
// the library's own checks (a stray --speedup without --timing, ...) speak.

import { readFileSync } from 'node:fs';
import { Option, type Command } from 'commander';
import { FLEET_SCHEDULERS, type FleetScheduler, type TimedFleetOptions } from '../fleet/timed-options.js';
import type { SloTargets } from '../fleet/slo-search.js';
import { readTimingFile } from '../node/timing-file.js';
import { parseTimingSpec, type TimingSpecInput } from '../timing/timing-model.js';
import { parseIntArg, positiveNumber } from './options.js';

export interface TimingFlags {
  timing?: string;
  scheduler?: FleetScheduler;
  maxNumBatchedTokens?: number;
  speedup?: number;
  concurrency?: number;
  sloTtftMs?: number;
  sloTpotMs?: number;
  sloItlMs?: number;
}

export const TIMING_FLAG_KEYS = ['timing', 'scheduler', 'maxNumBatchedTokens', 'speedup', 'concurrency', 'sloTtftMs', 'sloTpotMs', 'sloItlMs'] as const;

/** Each SLO flag, its target, and what it holds to (the p99 of the run's figure of that name). */
export const SLO_FLAGS = [
  { flag: '--slo-ttft-ms', key: 'sloTtftMs', target: 'ttftMs', what: 'time to first token' },
  { flag: '--slo-tpot-ms', key: 'sloTpotMs', target: 'tpotMs', what: 'time per output token (per request, (last token - first token) / (tokens - 1))' },
  { flag: '--slo-itl-ms', key: 'sloItlMs', target: 'itlMs', what: 'inter-token latency (every gap between two tokens of a request)' },
] as const;

/** Adds the timing and SLO flags; `prefix` starts each description ("fleets: " on sweep). */
export function addTimingOptions(cmd: Command, prefix = ''): Command {
  return cmd
    .option('--timing <file|default>', `${prefix}keep time in milliseconds: "default" (the built-in polynomial, docs/timing.md) or a profiled table (.json or .csv) or a timing spec (.json with "kind")`)
    .addOption(new Option('--scheduler <name>', `${prefix}each engine's scheduler: xllm (the replay kernel, timed) or continuous (chunked prefill, a token budget, preemption; timed with the default model unless --timing)`).choices(FLEET_SCHEDULERS))
    .option('--max-num-batched-tokens <n>', `${prefix}--scheduler continuous: prompt plus decode tokens per step (default 8192)`, (v: string) => parseIntArg('--max-num-batched-tokens', 1, v))
    .option('--speedup <x>', `${prefix}timed: request r arrives at its timestamp / x (default 1)`, positiveNumber('--speedup'))
    .option('--concurrency <n>', `${prefix}timed: a closed loop of n requests in flight, in trace order, ignoring timestamps`, (v: string) => parseIntArg('--concurrency', 1, v))
    .option('--slo-ttft-ms <ms>', `${prefix}timed: the fewest engines whose p99 ${SLO_FLAGS[0].what} is at most ms`, positiveNumber('--slo-ttft-ms'))
    .option('--slo-tpot-ms <ms>', `${prefix}timed: the fewest engines whose p99 ${SLO_FLAGS[1].what} is at most ms`, positiveNumber('--slo-tpot-ms'))
    .option('--slo-itl-ms <ms>', `${prefix}timed: the fewest engines whose p99 ${SLO_FLAGS[2].what} is at most ms`, positiveNumber('--slo-itl-ms'));
}

/**
 * `--timing`: "default" is the built-in polynomial; a .json file holding an
 * object with "kind" is a timing spec (a polynomial's coefficients, or a
 * table); any other .json or a .csv is a profiled table (readTimingFile).
 */
export function timingOf(arg: string): true | TimingSpecInput {
  if (arg === 'default') return true;
  if (/\.json$/i.test(arg)) {
    let v: unknown;
    try {
      v = JSON.parse(readFileSync(arg, 'utf8'));
    } catch {
      v = undefined; // readTimingFile says what is wrong with the file
    }
    if (v !== null && typeof v === 'object' && 'kind' in v) return parseTimingSpec(v, `${arg}: timing`) as TimingSpecInput;
  }
  return readTimingFile(arg);
}

/** The timed options given, as `fleet()` takes them (the timing file read). */
export function timedOptionsOf(f: TimingFlags): TimedFleetOptions {
  return {
    ...(f.timing !== undefined && { timing: timingOf(f.timing) }),
    ...(f.scheduler !== undefined && { scheduler: f.scheduler }),
    ...(f.maxNumBatchedTokens !== undefined && { maxNumBatchedTokens: f.maxNumBatchedTokens }),
    ...(f.speedup !== undefined && { speedup: f.speedup }),
    ...(f.concurrency !== undefined && { concurrency: f.concurrency }),
  };
}

/** The SLO targets given (undefined: none). */
export function sloOf(f: Pick<TimingFlags, 'sloTtftMs' | 'sloTpotMs' | 'sloItlMs'>): SloTargets | undefined {
  const given = SLO_FLAGS.filter((s) => f[s.key] !== undefined);
  if (given.length === 0) return undefined;
  return Object.fromEntries(given.map((s) => [s.target, f[s.key]])) as SloTargets;
}

/** Refuses SLO targets for a fleet on the step clock (it has no milliseconds to hold them to). */
export function checkSloTimed(slo: SloTargets | undefined, timed: boolean): void {
  if (slo === undefined || timed) return;
  const flag = SLO_FLAGS.find((s) => slo[s.target] !== undefined)!.flag;
  throw new Error(`${flag} needs a timed fleet: give --timing default (or a timing file) or --scheduler continuous`);
}
