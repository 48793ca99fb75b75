// A calibration (docs/validation.md, the calibration file): what no profile
// table knows -- the per-step CPU overhead and the link between GPUs --
// fitted to measured runs of one GPU by `kvpool calibrate`, with where the
// values came from (the runs, the profiles, the errors before and after).
// A profile model takes one with its spec; a preset may ship one.

import { describe } from '../validate.js';

/** The profile-model parameters a calibration sets. */
export const CALIBRATED_KEYS = ['cpuOverheadMs', 'linkLatencyUs', 'linkGBps'] as const;
export type CalibratedKey = (typeof CALIBRATED_KEYS)[number];

/** Mean and p99 error of a figure, % (predicted against measured). */
export interface ErrorPair {
  mean: number;
  p99: number;
}

/** One run a calibration was fitted to, and how far the model was from it before and after. */
export interface CalibrationRun {
  /** The run's name (its folder). */
  run: string;
  model: string;
  /** The profile it was predicted with (a preset's name or the folder given). */
  profile: string;
  /** The profile bundle's content hash (sha256 hex). */
  profileSha256: string;
  tp: number;
  requests: number;
  /** Errors, %, with the parameters the fit started from (no overhead, the default link). */
  before: { ttftMs: ErrorPair; tpotMs: ErrorPair; e2eMs: ErrorPair };
  /** Errors, %, with the fitted parameters. */
  after: { ttftMs: ErrorPair; tpotMs: ErrorPair; e2eMs: ErrorPair };
}

export interface Calibration {
  kind: 'kvpool-calibration';
  version: 1;
  /** The GPU, as a profile bundle names it (meta.yaml `hardware`): RTXPRO6000. */
  hardware: string;
  /** The values. */
  parameters: { cpuOverheadMs: number; linkLatencyUs: number; linkGBps: number };
  /** Which of them the runs determined (the others kept the value they started with). */
  fitted: CalibratedKey[];
  /** How the fit went: what was fitted, what could not be, and why. */
  notes: string[];
  runs: CalibrationRun[];
  /** The engine the runs were replayed with (vllm: vLLM's own scheduler and block pool). */
  engine: string;
  /** The kvpool version that fitted it. */
  kvpool: string;
}

type Obj = Record<string, unknown>;

function fail(where: string, message: string, range = true): never {
  throw new (range ? RangeError : TypeError)(`${where}${message}`);
}

function objectAt(where: string, v: unknown): Obj {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) fail(where, ` must be an object, got ${describe(v)}`, false);
  return v as Obj;
}

function finite(where: string, v: unknown, min: number, strict = false): number {
  if (typeof v !== 'number') fail(where, ` must be a number, got ${describe(v)}`, false);
  if (!Number.isFinite(v) || (strict ? v <= min : v < min)) fail(where, ` must be a finite number ${strict ? '>' : '>='} ${min}, got ${describe(v)}`);
  return v;
}

function text(where: string, v: unknown): string {
  if (typeof v !== 'string' || v === '') fail(where, ` must be a non-empty string, got ${describe(v)}`, false);
  return v;
}

function errors(where: string, v: unknown): CalibrationRun['before'] {
  const o = objectAt(where, v);
  const pair = (k: string): ErrorPair => {
    const p = objectAt(`${where}.${k}`, o[k]);
    return { mean: finite(`${where}.${k}.mean`, p['mean'], -Infinity), p99: finite(`${where}.${k}.p99`, p['p99'], -Infinity) };
  };
  return { ttftMs: pair('ttftMs'), tpotMs: pair('tpotMs'), e2eMs: pair('e2eMs') };
}

/**
 * Checks a calibration (parsed JSON, or its text) field by field; a refusal
 * names the field (`calibration.parameters.cpuOverheadMs must be ...`).
 */
export function parseCalibration(v: unknown, where = 'calibration'): Calibration {
  if (typeof v === 'string') {
    try {
      v = JSON.parse(v.charCodeAt(0) === 0xfeff ? v.slice(1) : v);
    } catch (e) {
      fail(where, `: not valid JSON (${(e as Error).message})`, false);
    }
  }
  const o = objectAt(where, v);
  if (o['kind'] !== 'kvpool-calibration') fail(`${where}.kind`, ` must be "kvpool-calibration", got ${describe(o['kind'])}`, false);
  if (o['version'] !== 1) fail(`${where}.version`, ` must be 1 (the only version), got ${describe(o['version'])}`);
  const known = ['kind', 'version', 'hardware', 'parameters', 'fitted', 'notes', 'runs', 'engine', 'kvpool'];
  const stray = Object.keys(o).find((k) => !known.includes(k));
  if (stray !== undefined) fail(`${where}.${stray}`, ` is not a field of a calibration (${known.join(', ')})`, false);
  const p = objectAt(`${where}.parameters`, o['parameters']);
  const parameters = {
    cpuOverheadMs: finite(`${where}.parameters.cpuOverheadMs`, p['cpuOverheadMs'], 0),
    linkLatencyUs: finite(`${where}.parameters.linkLatencyUs`, p['linkLatencyUs'], 0),
    linkGBps: finite(`${where}.parameters.linkGBps`, p['linkGBps'], 0, true),
  };
  const fitted = o['fitted'];
  if (!Array.isArray(fitted) || fitted.some((k) => !(CALIBRATED_KEYS as readonly unknown[]).includes(k))) fail(`${where}.fitted`, ` must list some of ${CALIBRATED_KEYS.join(', ')}, got ${describe(fitted)}`, false);
  const notes = o['notes'];
  if (!Array.isArray(notes) || notes.some((n) => typeof n !== 'string')) fail(`${where}.notes`, ` must be a list of sentences, got ${describe(notes)}`, false);
  const runs = o['runs'];
  if (!Array.isArray(runs)) fail(`${where}.runs`, ` must be a list, got ${describe(runs)}`, false);
  return {
    kind: 'kvpool-calibration',
    version: 1,
    hardware: text(`${where}.hardware`, o['hardware']),
    parameters,
    fitted: [...(fitted as CalibratedKey[])],
    notes: [...(notes as string[])],
    runs: runs.map((r, i) => {
      const w = `${where}.runs[${i}]`;
      const x = objectAt(w, r);
      const tp = x['tp'];
      const requests = x['requests'];
      if (typeof tp !== 'number' || !Number.isInteger(tp) || tp < 1) fail(`${w}.tp`, ` must be an integer >= 1, got ${describe(tp)}`);
      if (typeof requests !== 'number' || !Number.isInteger(requests) || requests < 1) fail(`${w}.requests`, ` must be an integer >= 1, got ${describe(requests)}`);
      return {
        run: text(`${w}.run`, x['run']),
        model: text(`${w}.model`, x['model']),
        profile: text(`${w}.profile`, x['profile']),
        profileSha256: text(`${w}.profileSha256`, x['profileSha256']),
        tp,
        requests,
        before: errors(`${w}.before`, x['before']),
        after: errors(`${w}.after`, x['after']),
      };
    }),
    engine: text(`${where}.engine`, o['engine']),
    kvpool: text(`${where}.kvpool`, o['kvpool']),
  };
}
