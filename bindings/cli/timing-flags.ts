// The flags that put a fleet on the millisecond clock (docs/fleet.md, time),
// shared by `kvpool fleet` and fleet sweeps, and the SLO targets they answer
// to. None has a default: each is passed to the library only when given, so
// the library's own checks (a stray --speedup without --timing, ...) speak.

import { Option, type Command } from 'commander';
import { FLEET_SCHEDULERS, type FleetScheduler, type TimedFleetOptions } from '../fleet/timed-options.js';
import type { SloTargets } from '../fleet/slo-search.js';
import { readTimingSpecFile } from '../node/timing-file.js';
import type { TimingSpecInput } from '../timing/timing-model.js';
import { didYouMean } from './did-you-mean.js';
import { parseIntArg, positiveNumber } from './options.js';

export interface TimingFlags {
  timing?: string;
  scheduler?: FleetScheduler;
  maxNumBatchedTokens?: number;
  speedup?: number;
  concurrency?: number;
  sloTtftMs?: number;
  sloItlMs?: number;
}

export const TIMING_FLAG_KEYS = ['timing', 'scheduler', 'maxNumBatchedTokens', 'speedup', 'concurrency', 'sloTtftMs', 'sloItlMs'] as const;

/** Adds the timing and SLO flags; `prefix` starts each description ("fleets: " on sweep). */
export function addTimingOptions(cmd: Command, prefix = ''): Command {
  return cmd
    .option('--timing <file|default>', `${prefix}keep time in milliseconds: "default" (the built-in polynomial, docs/timing.md) or a profiled table (.json or .csv) or a timing spec (.json with "kind")`)
    .addOption(new Option('--scheduler <name>', `${prefix}each engine's scheduler: xllm (the replay kernel, timed) or continuous (chunked prefill, a token budget, preemption; timed with the default model unless --timing)`).choices(FLEET_SCHEDULERS))
    .option('--max-num-batched-tokens <n>', `${prefix}--scheduler continuous: prompt plus decode tokens per step (default 8192)`, (v: string) => parseIntArg('--max-num-batched-tokens', 1, v))
    .option('--speedup <x>', `${prefix}timed: request r arrives at its timestamp / x (default 1)`, positiveNumber('--speedup'))
    .option('--concurrency <n>', `${prefix}timed: a closed loop of n requests in flight, in trace order, ignoring timestamps`, (v: string) => parseIntArg('--concurrency', 1, v))
    .option('--slo-ttft-ms <ms>', `${prefix}timed: the fewest engines whose p99 time to first token is at most ms`, positiveNumber('--slo-ttft-ms'))
    .option('--slo-itl-ms <ms>', `${prefix}timed: the fewest engines whose p99 inter-token latency is at most ms`, positiveNumber('--slo-itl-ms'));
}

/**
 * `--timing`: "default" is the built-in polynomial; a .json file holding an
 * object with "kind" is a timing spec (a polynomial's coefficients, or a
 * table); any other .json or a .csv is a profiled table. The file is read
 * once (readTimingSpecFile: a regular file, bounded), and every refusal
 * starts with the flag.
 */
export function timingOf(arg: string): true | TimingSpecInput {
  if (arg === 'default') return true;
  if (!/\.(json|csv)$/i.test(arg)) {
    throw new RangeError(`--timing ${JSON.stringify(arg)}: give default (the built-in polynomial) or a .json or .csv file${didYouMean(arg, ['default'])}`);
  }
  return readTimingSpecFile(arg, `--timing ${arg}`);
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
export function sloOf(f: TimingFlags): SloTargets | undefined {
  if (f.sloTtftMs === undefined && f.sloItlMs === undefined) return undefined;
  return { ...(f.sloTtftMs !== undefined && { ttftMs: f.sloTtftMs }), ...(f.sloItlMs !== undefined && { itlMs: f.sloItlMs }) };
}

/** Refuses SLO targets for a fleet on the step clock (it has no milliseconds to hold them to). */
export function checkSloTimed(slo: SloTargets | undefined, timed: boolean): void {
  if (slo !== undefined && !timed) throw new Error(`--slo-${slo.ttftMs !== undefined ? 'ttft' : 'itl'}-ms needs a timed fleet: give --timing default (or a timing file) or --scheduler continuous`);
}
