// The flags that put a fleet on the millisecond clock (docs/fleet.md, time),
// shared by `kvpool fleet` and fleet sweeps, and the SLO targets they answer
// to: the timing model (--timing, or a measured GPU profile with --profile
// and its parameters), the KV cache in GiB, the scheduler and arrivals. None
// has a default: each is passed to the library only when given, so the
// library's own checks (a stray --speedup without --timing, ...) speak.

import { InvalidArgumentError, Option, type Command } from 'commander';
import { FLEET_SCHEDULERS, type FleetScheduler, type TimedFleetOptions } from '../fleet/timed-options.js';
import type { SloTargets } from '../fleet/slo-search.js';
import { PROFILE_PRESETS } from '../node/profile-files.js';
import { readTimingSpecFile } from '../node/timing-file.js';
import { readCalibrationFile } from '../node/calibration-file.js';
import type { Calibration } from '../timing/calibration.js';
import { timingModel, type ProfileTiming, type TimingSpecInput } from '../timing/timing-model.js';
import { didYouMean } from './did-you-mean.js';
import { nonNegativeNumber, parseIntArg, positiveNumber } from './options.js';
import { restated } from '../validate.js';

/** The flags of a profile (docs/timing.md, the profile model). */
export interface ProfileFlags {
  profile?: string;
  tp?: number;
  cpuOverheadMs?: number;
  linkLatencyUs?: number;
  linkGbps?: number;
  skewFit?: boolean;
  calibration?: string;
  gpuMemoryGib?: number;
  kvCacheGib?: number;
  gpuMemoryUtilization?: number;
}

export interface TimingFlags extends ProfileFlags {
  timing?: string;
  scheduler?: FleetScheduler;
  maxNumBatchedTokens?: number;
  speedup?: number;
  concurrency?: number;
  sloTtftMs?: number;
  sloTpotMs?: number;
  sloItlMs?: number;
}

export const TIMING_FLAG_KEYS = ['timing', 'profile', 'tp', 'cpuOverheadMs', 'linkLatencyUs', 'linkGbps', 'skewFit', 'calibration', 'gpuMemoryGib', 'kvCacheGib', 'gpuMemoryUtilization', 'scheduler', 'maxNumBatchedTokens', 'speedup', 'concurrency', 'sloTtftMs', 'sloTpotMs', 'sloItlMs'] as const;

/** The profile's parameters and the KV sizing flags, one value each. */
export function addProfileOptions(cmd: Command, prefix = ''): Command {
  return cmd
    .option('--profile <name|dir>', `${prefix}keep time in milliseconds with a GPU profile measured with vLLM: a preset (${Object.keys(PROFILE_PRESETS).join(', ')}) or a profile bundle folder (docs/timing.md)`)
    .option('--tp <n>', `${prefix}--profile: tensor-parallel GPUs per dp rank, one of the profile's TP folders (default: its smallest)`, (v: string) => parseIntArg('--tp', 1, v))
    .option('--cpu-overhead-ms <ms>', `${prefix}--profile: CPU time added to every step, ms (default 0)`, nonNegativeNumber('--cpu-overhead-ms'))
    .option('--link-latency-us <us>', `${prefix}--profile: latency of one hop of a collective between GPUs, us (default 20)`, nonNegativeNumber('--link-latency-us'))
    .option('--link-gbps <GB/s>', `${prefix}--profile: bandwidth of the link between GPUs, GB/s (default 16)`, positiveNumber('--link-gbps'))
    .option('--skew-fit', `${prefix}--profile: blend decode attention toward the longest context by the profile's skew fit`)
    .option('--calibration <file|none>', `${prefix}--profile: the overhead and link fitted by kvpool calibrate (docs/validation.md); none: no calibration (no overhead, the default link); default: the one the profile ships with (the RTX PRO 6000 presets), if any`)
    .option('--gpu-memory-gib <GiB>', `${prefix}--profile: one GPU's memory in GiB, for --gpu-memory-utilization (default: the nominal memory of the profile's GPU, 24 for the RTX 4090 and 96 for the RTX PRO 6000; give it for another GPU)`, positiveNumber('--gpu-memory-gib'))
    .option('--kv-cache-gib <GiB>', `${prefix}timed: the KV cache of each GPU in GiB, in place of --num-blocks (blocks of the model's KV bytes per token)`, positiveNumber('--kv-cache-gib'))
    .option('--gpu-memory-utilization <x>', `${prefix}--profile: the share of each GPU's memory the engine uses (vLLM's); what weights and a 1.5 GiB activation reserve leave is the KV cache, in place of --num-blocks`, (v: string) => {
      const n = positiveNumber('--gpu-memory-utilization')(v);
      if (n > 1) throw new InvalidArgumentError(`--gpu-memory-utilization must be in (0, 1], got ${JSON.stringify(v)}`);
      return n;
    });
}

/** Each SLO flag, its target, and what it holds to (the p99 of the run's figure of that name). */
export const SLO_FLAGS = [
  { flag: '--slo-ttft-ms', key: 'sloTtftMs', target: 'ttftMs', what: 'time to first token' },
  { flag: '--slo-tpot-ms', key: 'sloTpotMs', target: 'tpotMs', what: 'time per output token (per request, (last token - first token) / (tokens - 1))' },
  { flag: '--slo-itl-ms', key: 'sloItlMs', target: 'itlMs', what: 'inter-token latency (every gap between two tokens of a request)' },
] as const;

/** Adds the timing and SLO flags; `prefix` starts each description ("fleets: " on sweep). */
export function addTimingOptions(cmd: Command, prefix = ''): Command {
  return addProfileOptions(cmd, prefix)
    .option('--timing <file|default>', `${prefix}keep time in milliseconds: "default" (the built-in polynomial, docs/timing.md) or a profiled table (.json or .csv) or a timing spec (.json with "kind")`)
    .addOption(new Option('--scheduler <name>', `${prefix}--engine xllm: each engine's scheduler: xllm (the replay kernel, timed) or continuous (chunked prefill, a token budget, preemption; timed with the default model unless --timing)`).choices(FLEET_SCHEDULERS))
    .option('--max-num-batched-tokens <n>', `${prefix}--scheduler continuous or --engine vllm: prompt plus decode tokens per step (vllm: per dp rank, on either clock) (default 8192)`, (v: string) => parseIntArg('--max-num-batched-tokens', 1, v))
    .option('--speedup <x>', `${prefix}timed: request r arrives at its timestamp / x (default 1)`, positiveNumber('--speedup'))
    .option('--concurrency <n>', `${prefix}timed: a closed loop of n requests in flight, in trace order, ignoring timestamps`, (v: string) => parseIntArg('--concurrency', 1, v))
    .option('--slo-ttft-ms <ms>', `${prefix}timed: the fewest engines whose p99 ${SLO_FLAGS[0].what} is at most ms`, positiveNumber('--slo-ttft-ms'))
    .option('--slo-tpot-ms <ms>', `${prefix}timed: the fewest engines whose p99 ${SLO_FLAGS[1].what} is at most ms`, positiveNumber('--slo-tpot-ms'))
    .option('--slo-itl-ms <ms>', `${prefix}timed: the fewest engines whose p99 ${SLO_FLAGS[2].what} is at most ms`, positiveNumber('--slo-itl-ms'));
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

/** `--calibration`: a calibration file, or none (false: no calibration at all). */
export function calibrationOf(arg: string): Calibration | false {
  if (arg === 'none') return false;
  return readCalibrationFile(arg, `--calibration ${arg}`);
}

/** The profile's parameters as flags name them, for refusals. */
const PROFILE_FLAGS: Record<string, string> = { profile: '--profile', tp: '--tp', cpuOverheadMs: '--cpu-overhead-ms', linkLatencyUs: '--link-latency-us', linkGBps: '--link-gbps', skew: '--skew-fit', calibration: '--calibration', gpuMemoryGib: '--gpu-memory-gib' };

/**
 * `--profile` and its parameters as a timing spec (undefined: no --profile),
 * the profile read and checked now, so that a refusal comes before a trace
 * is read and names the flag.
 */
export function profileOf(f: ProfileFlags & { timing?: string }): ProfileTiming | undefined {
  const params = (['tp', 'cpuOverheadMs', 'linkLatencyUs', 'linkGbps', 'skewFit', 'calibration', 'gpuMemoryGib'] as const).filter((k) => f[k] !== undefined);
  if (f.profile === undefined) {
    if (params.length > 0) throw new Error(`--${params[0]!.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} applies to --profile`);
    return undefined;
  }
  if (f.timing !== undefined) throw new Error('--profile and --timing both choose the timing model: give one');
  const spec: ProfileTiming = {
    kind: 'profile',
    profile: f.profile,
    ...(f.tp !== undefined && { tp: f.tp }),
    ...(f.cpuOverheadMs !== undefined && { cpuOverheadMs: f.cpuOverheadMs }),
    ...(f.linkLatencyUs !== undefined && { linkLatencyUs: f.linkLatencyUs }),
    ...(f.linkGbps !== undefined && { linkGBps: f.linkGbps }),
    ...(f.skewFit === true && { skew: true }),
    ...(f.gpuMemoryGib !== undefined && { gpuMemoryGib: f.gpuMemoryGib }),
    ...(f.calibration !== undefined && { calibration: calibrationOf(f.calibration) }),
  };
  try {
    timingModel(spec);
  } catch (e) {
    throw restated(e, (e as Error).message.replace(/timing\.([a-zA-Z]+)/g, (whole, k: string) => PROFILE_FLAGS[k] ?? whole), TypeError);
  }
  return spec;
}

/** The timed options given, as `fleet()` takes them (the timing file read, the profile checked). */
export function timedOptionsOf(f: TimingFlags): TimedFleetOptions {
  const profile = profileOf(f);
  return {
    ...(f.timing !== undefined && { timing: timingOf(f.timing) }),
    ...(profile !== undefined && { timing: profile }),
    ...(f.kvCacheGib !== undefined && { kvCacheGib: f.kvCacheGib }),
    ...(f.gpuMemoryUtilization !== undefined && { gpuMemoryUtilization: f.gpuMemoryUtilization }),
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
  throw new Error(`${flag} needs a timed fleet: give --timing default (or a timing file), --profile or --scheduler continuous`);
}
