// `validate`: a measured run replayed on kvpool's clock and compared
// (docs/validation.md). The run's engine settings come from its meta.json;
// its requests arrive as they did (arrival_time - the first arrival), with
// prompts that share no prefix, at one vLLM engine of a timed fleet whose
// steps last what a GPU profile says; the measured and the predicted TTFT,
// TPOT, ITL and end-to-end latency are set side by side.

import { fleetSync } from '../fleet/fleet.js';
import type { FleetOptions } from '../fleet/fleet-options.js';
import type { FleetLatency } from '../fleet/fleet-latency.js';
import type { TraceRequest } from '../replay/trace.js';
import type { Calibration } from '../timing/calibration.js';
import type { ProfileBundle } from '../timing/profile-bundle.js';
import type { ProfileModel } from '../timing/profile-model.js';
import { profileModel, type ProfileTiming } from '../timing/profile-spec.js';
import { resolveProfile } from '../timing/profile-source.js';
import { checkKeys, checkObject, describe } from '../validate.js';
import { differencePct, measuredFigures, predictedFigures, type FigureKey, type Figures, type StatKey } from './measured-figures.js';
import type { PeerSummary } from './peer-summary.js';
import type { MeasuredRun, MeasuredTick } from './run-format.js';
import { engineSettings, runTp, type EngineSettings, type Setting } from './run-settings.js';
import { predictedSeries, type SeriesPoint } from './series.js';

/**
 * The engine a run is replayed on: kvpool's vLLM engine (vLLM v1's own
 * scheduler and block pool, scheduler_reserve_full_isl on as vLLM 0.19
 * runs it). One place, so that another engine is this line
 * (docs/validation.md, the replay).
 */
export const VALIDATION_ENGINE = { engine: 'vllm' } as const satisfies Partial<FleetOptions>;

/** Its name in results and calibrations. */
export const VALIDATION_ENGINE_NAME = 'vllm';

export interface ValidateOptions {
  /** The GPU profile: a preset, a bundle folder (Node) or a parsed bundle. */
  profile: string | ProfileBundle;
  /** Tensor-parallel GPUs (default: the run's tensor_parallel_size). */
  tp?: number;
  /** Fitted overhead and link (`kvpool calibrate`); default: the profile's shipped calibration, if any; false: none. */
  calibration?: Calibration | false;
  /** How to name the calibration in the settings' sources (a file's name). */
  calibrationName?: string;
  /** These win over any calibration (what calibrate varies). */
  cpuOverheadMs?: number;
  linkLatencyUs?: number;
  linkGBps?: number;
  /** The profile's skew fit (default false). */
  skew?: boolean;
  /** KV blocks per dp rank, in place of the run's own or derived count. */
  numBlocks?: number;
  /**
   * One GPU's memory, GiB, when the KV cache is derived (the run logs no
   * num_gpu_blocks): wins over the run's logged device memory and the
   * profile's nominal one (needed for a GPU kvpool does not know).
   */
  gpuMemoryGib?: number;
}

const OPTION_KEYS = ['profile', 'tp', 'calibration', 'calibrationName', 'cpuOverheadMs', 'linkLatencyUs', 'linkGBps', 'skew', 'numBlocks', 'gpuMemoryGib'];

export interface TimingSettings {
  /** The profile model's name (its bundle, hash and every parameter). */
  timing: string;
  profile: string;
  profileSha256: string;
  cpuOverheadMs: Setting<number>;
  linkLatencyUs: Setting<number>;
  linkGBps: Setting<number>;
  skew: boolean;
  /** The engine that replays the run (vllm: vLLM's own scheduler and block pool). */
  engine: string;
}

export interface Validation {
  run: string;
  model: string;
  requests: number;
  settings: EngineSettings & TimingSettings;
  measured: Figures;
  predicted: Figures;
  /** (predicted - measured) / measured, %; null where the run has no measured figure (ITL's percentiles). */
  differencePct: Record<FigureKey, Record<StatKey, number | null>>;
  /** The peer simulator's prediction of the same run, when the run has one. */
  peer?: PeerSummary;
  /** What was compared and what could not be, and what the run's files let through. */
  notes: string[];
  /** The replay: engine steps, preemptions, and when the last token came (ms from the first arrival; measured beside it). */
  replay: { steps: number; preemptions: number; rejected: number; truncated: number; makespanMs: number; measuredMakespanMs: number };
  /** Per request, in arrival order: arrival (s from the first), measured and predicted TTFT (ms; null: no first token). */
  perRequest: { arrivalS: number[]; measuredTtftMs: number[]; predictedTtftMs: Array<number | null> };
  /** Per second: the run's own time series, and the replay's in the same terms. */
  series: { measured: MeasuredTick[]; predicted: SeriesPoint[] };
}

/** The run's requests as a trace: arrivals in ms from the first, prompts of content no other prompt shares. */
export function runTrace(run: MeasuredRun): TraceRequest[] {
  const a0 = run.requests[0]!.arrivalTime;
  let next = 0;
  return run.requests.map((r) => {
    const n = Math.ceil(r.inputTokens / 512);
    const hashIds = new Int32Array(n);
    for (let i = 0; i < n; i++) hashIds[i] = next++;
    return { inputLength: r.inputTokens, outputLength: r.outputTokens, hashIds, timestamp: (r.arrivalTime - a0) * 1000 };
  });
}

function param(key: 'cpuOverheadMs' | 'linkLatencyUs' | 'linkGBps', o: ValidateOptions, model: ProfileModel): Setting<number> {
  const value = model.p[key];
  if (o[key] !== undefined) return { value, source: `given (options.${key})` };
  if (o.calibration !== undefined && o.calibration !== false) return { value, source: `calibration ${o.calibrationName ?? `of ${o.calibration.runs.map((r) => r.run).join(', ') || 'no run'}`}` };
  if (o.calibration === undefined && model.bundle.calibration !== undefined) return { value, source: `the calibration shipped with profile ${model.bundle.name} (docs/validation.md)` };
  return { value, source: o.calibration === false ? 'default (no calibration)' : 'default (the profile has no calibration)' };
}

/**
 * Checks the options; the profile model they describe for a run of TP `tp`
 * (with where it came from: a run's own TP that the profile was not
 * measured at is refused saying so). Refusals name `name.<field>`.
 */
export function validationModel(o: ValidateOptions, tp: number | Setting<number>, name = 'options'): ProfileModel {
  const t = typeof tp === 'number' ? { value: tp, source: `given (${name}.tp)` } : tp;
  const bundle = resolveProfile(`${name}.profile`, o.profile);
  if (bundle.tp[t.value] === undefined && o.tp === undefined) {
    const degrees = Object.keys(bundle.tp).map(Number).sort((x, y) => x - y);
    throw new RangeError(`${name}.tp: the run ran at TP ${t.value} (${t.source}), but profile ${bundle.name} has TP ${degrees.join(', ')}: give ${name}.tp to replay it at one of them, or a profile of that TP`);
  }
  const spec: ProfileTiming = {
    kind: 'profile',
    profile: bundle,
    tp: t.value,
    ...(o.calibration !== undefined && { calibration: o.calibration }),
    ...(o.cpuOverheadMs !== undefined && { cpuOverheadMs: o.cpuOverheadMs }),
    ...(o.linkLatencyUs !== undefined && { linkLatencyUs: o.linkLatencyUs }),
    ...(o.linkGBps !== undefined && { linkGBps: o.linkGBps }),
    ...(o.skew !== undefined && { skew: o.skew }),
    ...(o.gpuMemoryGib !== undefined && { gpuMemoryGib: o.gpuMemoryGib }),
  };
  return profileModel(spec, name);
}

/** Checks `validateRun`'s arguments (before anything runs). */
export function checkValidateOptions(o: ValidateOptions): void {
  checkObject('options', o);
  checkKeys('options', o, OPTION_KEYS);
  if (o.calibrationName !== undefined && typeof o.calibrationName !== 'string') throw new TypeError(`options.calibrationName must be a string, got ${describe(o.calibrationName)}`);
  if (o.numBlocks !== undefined && (typeof o.numBlocks !== 'number' || !Number.isInteger(o.numBlocks) || o.numBlocks < 2)) throw new RangeError(`options.numBlocks must be an integer >= 2, got ${describe(o.numBlocks)}`);
}

/**
 * Replays a measured run with a GPU profile and compares its figures with
 * the run's (synchronous: the core must be loaded; in Node it loads on
 * first use).
 */
export function validateRun(run: MeasuredRun, o: ValidateOptions): Validation {
  if (run === null || typeof run !== 'object' || !Array.isArray((run as MeasuredRun).requests) || (run as MeasuredRun).requests.length === 0) throw new TypeError(`run must be a measured run (parseMeasuredRun, or readMeasuredRun in Node), got ${describe(run)}`);
  checkValidateOptions(o);
  const tp = runTp(run.meta, o.tp);
  const model = validationModel(o, tp);
  const settings = engineSettings(run.name, run.meta, model, tp, o.numBlocks, o.gpuMemoryGib !== undefined);
  const trace = runTrace(run);
  const fleetRun = fleetSync({
    trace,
    engines: 1,
    ...VALIDATION_ENGINE,
    maxRunning: settings.maxNumSeqs.value,
    maxNumBatchedTokens: settings.maxNumBatchedTokens.value,
    numBlocks: settings.numBlocks.value,
    blockSize: settings.blockSize.value,
    dpSize: settings.dp.value,
    timing: model,
  });
  const l = fleetRun.latency as FleetLatency;
  const measured = measuredFigures(run.requests);
  const predicted = predictedFigures(l);
  const notes = [
    'measured ITL: the run records only the first and the last token of each request, so of the gaps between tokens it gives the mean (their sum over their count) and no percentile; the predicted ITL is over every gap',
    ...(run.meta.enableExpertParallel === true && !model.bundle.sequence.moe ? ['meta.json enables expert parallelism, but the model has no experts: nothing to do'] : []),
    // The profile model places experts by its own rule (docs/timing.md, MoE): say where that differs from the run's.
    ...(run.meta.enableExpertParallel === true && model.bundle.sequence.moe && settings.dp.value === 1 && model.bundle.tp[tp.value]?.moe !== undefined
      ? [`meta.json enables expert parallelism on one dp rank; the profile model splits the experts over the TP GPUs by width there (tp${tp.value}/moe.csv), as vLLM does without it`]
      : []),
    ...(run.meta.enableExpertParallel === false && model.bundle.sequence.moe && (settings.dp.value > 1 || model.bundle.tp[tp.value]?.moe === undefined)
      ? ['meta.json runs without expert parallelism; the profile model places whole experts on the GPUs here (several dp ranks, or no moe.csv at this TP)']
      : []),
    ...run.notes,
  ];
  const cut = fleetRun.rejected + fleetRun.truncated;
  if (cut > 0) notes.push(`the replay could not serve ${cut} of the ${run.requests.length} requests whole (${fleetRun.rejected} rejected, ${fleetRun.truncated} cut short for lack of KV blocks): the predicted figures leave them out, the measured ones do not`);
  if (run.meta.model.toLowerCase() !== model.bundle.model.name.toLowerCase()) notes.push(`the run served ${run.meta.model}; profile ${model.bundle.name} was measured with ${model.bundle.model.name}`);
  const q0 = run.requests[0]!.queuedTs;
  const a0 = run.requests[0]!.arrivalTime;
  const lastToken = run.requests.reduce((m, r) => Math.max(m, r.lastTokenTs), -Infinity);
  const engine = l.engines[0]!;
  const result: Validation = {
    run: run.name,
    model: run.meta.model,
    requests: run.requests.length,
    settings: {
      ...settings,
      timing: model.name,
      profile: model.bundle.name,
      profileSha256: model.bundle.sha256,
      cpuOverheadMs: param('cpuOverheadMs', o, model),
      linkLatencyUs: param('linkLatencyUs', o, model),
      linkGBps: param('linkGBps', o, model),
      skew: model.p.skew,
      engine: VALIDATION_ENGINE_NAME,
    },
    measured,
    predicted,
    differencePct: differencePct(measured, predicted),
    notes,
    replay: {
      steps: engine.steps,
      preemptions: l.preemptions,
      rejected: fleetRun.rejected,
      truncated: fleetRun.truncated,
      makespanMs: l.durationMs,
      measuredMakespanMs: Math.round((lastToken - q0) * 1e6) / 1e3,
    },
    perRequest: {
      arrivalS: run.requests.map((r) => r.arrivalTime - a0),
      measuredTtftMs: run.requests.map((r) => (r.firstTokenTs - r.queuedTs) * 1000),
      predictedTtftMs: l.requests.firstTokenMs.map((f, i) => (f === null ? null : f - l.requests.arrivalMs[i]!)),
    },
    series: { measured: run.timeseries, predicted: predictedSeries(l, run.requests.map((r) => r.inputTokens)) },
  };
  if (run.peer !== undefined) result.peer = run.peer;
  return result;
}
