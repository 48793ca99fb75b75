// `calibrate` (docs/validation.md, calibrating): fits what no profile table
// knows -- the per-step CPU overhead and the link between GPUs (latency per
// hop, bandwidth) -- to measured runs of one GPU, by replaying them
// (validateRun) and moving the parameters until the worst error of the
// figures planners read (TTFT, TPOT and E2E, mean and p99, on every run) is
// smallest. What the runs cannot determine is not fitted, and the result
// says why:
//
// - a link no run uses (every run on one GPU, one rank) keeps its default;
// - when every run pays the overhead and the link's latency in the same
//   proportion (the same hops and layers per step), only their sum shows:
//   the latency keeps at most its default and the overhead takes the rest.

import { PROFILE_DEFAULTS } from '../timing/profile-spec.js';
import type { ProfileModel } from '../timing/profile-model.js';
import type { ProfileBundle } from '../timing/profile-bundle.js';
import { addDecode, emptyStepBatch, addChunk } from '../timing/step-batch.js';
import { CALIBRATED_KEYS, type CalibratedKey, type Calibration, type CalibrationRun, type ErrorPair } from '../timing/calibration.js';
import { checkKeys, checkObject, describe } from '../validate.js';
import { nelderMead } from './nelder-mead.js';
import type { MeasuredRun } from './run-format.js';
import { runTp } from './run-settings.js';
import { validateRun, validationModel, VALIDATION_ENGINE_NAME, type Validation } from './validate-run.js';

/** A run to fit, with the profile of its model on the GPU it ran on. */
export interface CalibrateRun {
  run: MeasuredRun;
  profile: string | ProfileBundle;
  /** Default: the run's tensor_parallel_size. */
  tp?: number;
  /** One GPU's memory in GiB, when the run's KV cache is derived (validateRun's option): a GPU kvpool does not know needs it. */
  gpuMemoryGib?: number;
  /** The run's KV blocks per rank, when its meta.json logs none (validateRun's option). */
  numBlocks?: number;
}

export interface CalibrateOptions {
  /** The profile's skew fit while fitting (default false). */
  skew?: boolean;
  /** Most replays of all the runs tried (default 160). */
  maxEvaluations?: number;
  /** Called after each try: how many, and the worst error of the best so far (%). */
  onProgress?: (evaluations: number, worstPct: number) => void;
  /** Recorded in the calibration (the Node entry gives the package's version). */
  kvpoolVersion?: string;
}

/** The figures a fit holds to, as (key, stat) pairs. */
const FITTED_FIGURES = [
  ['ttftMs', 'mean'],
  ['ttftMs', 'p99'],
  ['tpotMs', 'mean'],
  ['tpotMs', 'p99'],
  ['e2eMs', 'mean'],
  ['e2eMs', 'p99'],
] as const;

type Params = { cpuOverheadMs: number; linkLatencyUs: number; linkGBps: number };

/** The worst |error| over the fitted figures of these validations, with a small share of their mean as a tie-break. */
export function fitError(vs: readonly Validation[]): number {
  let worst = 0;
  let sum = 0;
  let n = 0;
  for (const v of vs) {
    for (const [k, s] of FITTED_FIGURES) {
      const e = Math.abs(v.differencePct[k][s] ?? 0);
      if (e > worst) worst = e;
      sum += e;
      n++;
    }
  }
  return worst + (0.1 * sum) / Math.max(1, n);
}

function errorPairs(v: Validation): CalibrationRun['before'] {
  const pair = (k: 'ttftMs' | 'tpotMs' | 'e2eMs'): ErrorPair => ({ mean: v.differencePct[k].mean ?? 0, p99: v.differencePct[k].p99 ?? 0 });
  return { ttftMs: pair('ttftMs'), tpotMs: pair('tpotMs'), e2eMs: pair('e2eMs') };
}

/** ms a step gains per us of link latency, and per (1 / GB/s) of bandwidth, in a model like `m` at one rank. */
function linkUse(m: ProfileModel, tp: number): { latency: number; bandwidth: number } {
  const at = (linkLatencyUs: number, linkGBps: number) => validationModel({ profile: m.bundle, calibration: false, linkLatencyUs, linkGBps }, tp);
  const decode = emptyStepBatch();
  addDecode(decode, 1000);
  const prefill = emptyStepBatch();
  addChunk(prefill, 2048, 0);
  const free = at(0, 1e12);
  return { latency: at(1, 1e12).stepMs(decode) - free.stepMs(decode), bandwidth: at(0, 1).stepMs(prefill) - free.stepMs(prefill) };
}

const round = (x: number, digits: number) => Math.round(x * 10 ** digits) / 10 ** digits;

function checkRuns(runs: unknown): asserts runs is CalibrateRun[] {
  if (!Array.isArray(runs) || runs.length === 0) throw new TypeError(`runs must be a non-empty list of { run, profile }, got ${describe(runs)}`);
  runs.forEach((r, i) => {
    checkObject(`runs[${i}]`, r);
    checkKeys(`runs[${i}]`, r as object, ['run', 'profile', 'tp', 'gpuMemoryGib', 'numBlocks']);
    const x = r as CalibrateRun;
    if (x.run === null || typeof x.run !== 'object' || !Array.isArray(x.run.requests)) throw new TypeError(`runs[${i}].run must be a measured run, got ${describe(x.run)}`);
    if (x.numBlocks !== undefined && (typeof x.numBlocks !== 'number' || !Number.isInteger(x.numBlocks) || x.numBlocks < 2)) throw new RangeError(`runs[${i}].numBlocks must be an integer >= 2, got ${describe(x.numBlocks)}`);
  });
}

/**
 * Fits the overhead and the link to the runs (each replayed with its
 * profile, no calibration) and returns the calibration, with the errors
 * before (no overhead, the default link) and after. Synchronous.
 */
export function calibrate(runs: readonly CalibrateRun[], o: CalibrateOptions = {}): Calibration {
  checkRuns(runs);
  checkObject('options', o);
  checkKeys('options', o, ['skew', 'maxEvaluations', 'onProgress', 'kvpoolVersion']);
  const maxEvaluations = o.maxEvaluations ?? 160;
  if (!Number.isInteger(maxEvaluations) || maxEvaluations < 1) throw new RangeError(`options.maxEvaluations must be an integer >= 1, got ${describe(maxEvaluations)}`);
  const skew = o.skew ?? false;
  // Every run's model and profile checked before any replay.
  const setups = runs.map((r, i) => {
    const tp = runTp(r.run.meta, r.tp);
    // Its GPU memory too, so that a bad one is refused (as runs[i].gpuMemoryGib) before any replay.
    const model = validationModel({ profile: r.profile, calibration: false, skew, ...(r.tp !== undefined && { tp: r.tp }), ...(r.gpuMemoryGib !== undefined && { gpuMemoryGib: r.gpuMemoryGib }) }, tp, `runs[${i}]`);
    if (r.run.meta.model.toLowerCase() !== model.bundle.model.name.toLowerCase()) {
      throw new RangeError(`runs[${i}]: run ${r.run.name} served ${r.run.meta.model}, but profile ${model.bundle.name} was measured with ${model.bundle.model.name} (give each run the profile of its model)`);
    }
    return { r, tp: tp.value, model, use: linkUse(model, tp.value) };
  });
  const hardware = setups[0]!.model.bundle.hardware;
  const other = setups.find((s) => s.model.bundle.hardware !== hardware);
  if (other !== undefined) throw new RangeError(`runs: a calibration is for one GPU; profile ${setups[0]!.model.bundle.name} is ${hardware}, profile ${other.model.bundle.name} is ${other.model.bundle.hardware}`);

  const kvOf = (r: CalibrateRun) => ({ ...(r.gpuMemoryGib !== undefined && { gpuMemoryGib: r.gpuMemoryGib }), ...(r.numBlocks !== undefined && { numBlocks: r.numBlocks }) });
  const replay = (p: Params) => setups.map((s) => validateRun(s.r.run, { profile: s.model.bundle, tp: s.tp, calibration: false, skew, ...kvOf(s.r), ...p }));
  const start: Params = { cpuOverheadMs: PROFILE_DEFAULTS.cpuOverheadMs, linkLatencyUs: PROFILE_DEFAULTS.linkLatencyUs, linkGBps: PROFILE_DEFAULTS.linkGBps };
  const before = replay(start);

  const linked = setups.some((s) => s.use.latency > 0);
  const lat = setups.map((s) => s.use.latency);
  // The overhead adds 1 ms a step, the latency `use.latency` ms per us: in the same proportion on every run, only the sum shows.
  const together = linked && lat.every((c) => c > 0 && Math.abs(c - lat[0]!) <= 1e-9 * lat[0]!);
  const notes: string[] = [];
  let fitted: CalibratedKey[];
  let toParams: (x: number[]) => Params;
  let x0: number[];
  let step: number[];
  const clampLog = (v: number) => Math.min(Math.max(v, Math.log(0.1)), Math.log(1e4));
  if (!linked) {
    fitted = ['cpuOverheadMs'];
    notes.push(`no run's GPUs talk to each other (every run on one GPU, one rank): the link keeps its default (${start.linkLatencyUs} us, ${start.linkGBps} GB/s)`);
    toParams = (x) => ({ ...start, cpuOverheadMs: Math.max(0, x[0]!) });
    x0 = [0.5];
    step = [0.5];
  } else if (together) {
    fitted = [...CALIBRATED_KEYS];
    const c = lat[0]!;
    notes.push(`every run pays the overhead and the link's latency once per step in the same proportion (${round(c * 1000, 3)} us a step per us of latency), so the runs show only their sum: the latency keeps at most its default (${start.linkLatencyUs} us) and the overhead takes the rest; runs with another TP degree or layer count would tell them apart`);
    // x = [the sum, in ms a step; log bandwidth]
    toParams = (x) => {
      const sum = Math.max(0, x[0]!);
      const linkLatencyUs = Math.min(start.linkLatencyUs, sum / c);
      return { cpuOverheadMs: sum - linkLatencyUs * c, linkLatencyUs, linkGBps: Math.exp(clampLog(x[1]!)) };
    };
    x0 = [start.linkLatencyUs * c, Math.log(start.linkGBps)];
    step = [Math.max(0.5, 0.25 * start.linkLatencyUs * c), 0.3];
  } else {
    fitted = [...CALIBRATED_KEYS];
    toParams = (x) => ({ cpuOverheadMs: Math.max(0, x[0]!), linkLatencyUs: Math.max(0, x[1]!), linkGBps: Math.exp(clampLog(x[2]!)) });
    x0 = [0.5, start.linkLatencyUs, Math.log(start.linkGBps)];
    step = [0.5, Math.max(1, start.linkLatencyUs / 4), 0.3];
  }
  // Outside the bounds a point is scored at the nearest point inside, plus how far out it is, so the simplex comes back.
  const outside = (x: number[]) => Math.max(0, -x[0]!) + (fitted.length === 3 && !together ? Math.max(0, -x[1]!) : 0);
  let best = Infinity;
  let tries = 0;
  const objective = (x: number[]) => {
    const v = fitError(replay(toParams(x))) + 10 * outside(x);
    tries++;
    if (v < best) best = v;
    o.onProgress?.(tries, best);
    return v;
  };
  const res = nelderMead(objective, x0, { step, maxEvaluations, tolerance: 0.005 });
  const p = toParams(res.x);
  const parameters = { cpuOverheadMs: round(p.cpuOverheadMs, 4), linkLatencyUs: round(p.linkLatencyUs, 3), linkGBps: round(p.linkGBps, 3) };
  const after = replay(parameters);
  notes.push(`fitted to ${runs.length} run${runs.length > 1 ? 's' : ''} in ${res.evaluations} replays of each: the largest error of TTFT, TPOT and E2E (mean and p99) went from ${round(Math.max(...before.flatMap(worstOf)), 2)} % to ${round(Math.max(...after.flatMap(worstOf)), 2)} %`);
  return {
    kind: 'kvpool-calibration',
    version: 1,
    hardware,
    parameters,
    fitted,
    notes,
    runs: setups.map((s, i) => ({
      run: s.r.run.name,
      model: s.r.run.meta.model,
      profile: s.model.bundle.name,
      profileSha256: s.model.bundle.sha256,
      tp: s.tp,
      requests: s.r.run.requests.length,
      before: errorPairs(before[i]!),
      after: errorPairs(after[i]!),
    })),
    engine: VALIDATION_ENGINE_NAME,
    kvpool: o.kvpoolVersion ?? 'unknown',
  };
}

function worstOf(v: Validation): number[] {
  return FITTED_FIGURES.map(([k, s]) => Math.abs(v.differencePct[k][s] ?? 0));
}
