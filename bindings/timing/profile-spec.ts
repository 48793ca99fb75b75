// The profile model's spec (docs/timing.md, the profile model): which
// bundle, which TP degree, and what no table knows (the per-step CPU
// overhead, the interconnect, host loads), each with a documented default.

import { checkBool, checkKeys, describe } from '../validate.js';
import { parseCalibration, type Calibration } from './calibration.js';
import { GPU_MEMORY_GIB, kvBytesPerToken } from './kv-capacity.js';
import type { ProfileBundle } from './profile-bundle.js';
import { ProfileModel, type ProfileParameters } from './profile-model.js';
import { resolveProfile } from './profile-source.js';
import { nonNegative, positive } from './polynomial.js';

export interface ProfileTiming {
  kind: 'profile';
  /** A preset ("rtxpro6000/llama-3.1-8b") or a bundle folder, read in Node; or a bundle from parseProfileBundle(). */
  profile: string | ProfileBundle;
  /** Tensor-parallel GPUs per dp rank: one of the bundle's TP folders (default: its smallest). */
  tp?: number;
  /** Added to every step that computes anything, ms (default 0). */
  cpuOverheadMs?: number;
  /** Per hop of a collective, us (default 20). */
  linkLatencyUs?: number;
  /** Link bandwidth, GB/s (default 16). */
  linkGBps?: number;
  /** Blend decode attention toward the longest context by the bundle's skew fit (default false). */
  skew?: boolean;
  /** Host-to-device bandwidth of host-tier loads, GB/s (default 25). */
  hostGBps?: number;
  /** Bytes one host-tier block load moves (default: a block of the bundle's block size on one GPU). */
  blockBytes?: number;
  /** One GPU's memory, GiB (default: the nominal memory of the bundle's GPU, when known). */
  gpuMemoryGib?: number;
  /**
   * The overhead and link fitted to measured runs of the GPU (`kvpool
   * calibrate`, docs/validation.md); a field given above wins over it.
   * Default: the calibration the bundle ships with, if any; false: none
   * (no overhead and the default link, whatever the bundle ships).
   */
  calibration?: Calibration | false;
}

/** The defaults of what no table knows: an idle CPU and the link the peer simulator assumed for these machines (PCIe). */
export const PROFILE_DEFAULTS = Object.freeze({ cpuOverheadMs: 0, linkLatencyUs: 20, linkGBps: 16, skew: false, hostGBps: 25 });

export const PROFILE_KEYS = ['kind', 'profile', 'tp', 'cpuOverheadMs', 'linkLatencyUs', 'linkGBps', 'skew', 'hostGBps', 'blockBytes', 'gpuMemoryGib', 'calibration'];

/** The spec checked (its bundle not yet read): a refusal names the field. */
export function checkProfileSpec(o: Record<string, unknown>, name: string): void {
  checkKeys(name, o, PROFILE_KEYS);
  if (o['profile'] === undefined) throw new TypeError(`${name}.profile is required: a preset name, a bundle folder or a parsed bundle`);
  if (o['tp'] !== undefined && (typeof o['tp'] !== 'number' || !Number.isInteger(o['tp']) || o['tp'] < 1)) throw new RangeError(`${name}.tp must be an integer >= 1, got ${describe(o['tp'])}`);
  if (o['cpuOverheadMs'] !== undefined) nonNegative(`${name}.cpuOverheadMs`, o['cpuOverheadMs']);
  if (o['linkLatencyUs'] !== undefined) nonNegative(`${name}.linkLatencyUs`, o['linkLatencyUs']);
  for (const k of ['linkGBps', 'hostGBps', 'blockBytes', 'gpuMemoryGib']) if (o[k] !== undefined) positive(`${name}.${k}`, o[k]);
  if (o['skew'] !== undefined) checkBool(`${name}.skew`, o['skew']);
  if (o['calibration'] !== undefined && o['calibration'] !== false) parseCalibration(o['calibration'], `${name}.calibration`);
}

/** The complete parameters for a bundle; a refusal names the field as `name.<field>`. */
export function profileParameters(b: ProfileBundle, o: Omit<ProfileTiming, 'kind' | 'profile'>, name = 'timing'): ProfileParameters {
  const degrees = Object.keys(b.tp).map(Number).sort((x, y) => x - y);
  const tp = o.tp ?? degrees[0]!;
  if (b.tp[tp] === undefined) throw new RangeError(`${name}.tp: profile ${b.name} has TP ${degrees.join(', ')}, got ${tp}`);
  const cal = o.calibration === false ? undefined : (o.calibration ?? b.calibration);
  // A calibration describes one GPU (its overhead, its links): another GPU's would be a silent error.
  if (cal !== undefined && cal.hardware !== b.hardware) throw new RangeError(`${name}.calibration: fitted on ${cal.hardware}, but profile ${b.name} was measured on ${b.hardware}`);
  const fit = cal?.parameters;
  return {
    tp,
    cpuOverheadMs: o.cpuOverheadMs ?? fit?.cpuOverheadMs ?? PROFILE_DEFAULTS.cpuOverheadMs,
    linkLatencyUs: o.linkLatencyUs ?? fit?.linkLatencyUs ?? PROFILE_DEFAULTS.linkLatencyUs,
    linkGBps: o.linkGBps ?? fit?.linkGBps ?? PROFILE_DEFAULTS.linkGBps,
    skew: o.skew ?? PROFILE_DEFAULTS.skew,
    hostGBps: o.hostGBps ?? PROFILE_DEFAULTS.hostGBps,
    blockBytes: o.blockBytes ?? kvBytesPerToken(b.model, tp) * b.blockSize,
    gpuMemoryGib: o.gpuMemoryGib ?? GPU_MEMORY_GIB[b.hardware],
  };
}

/** The profile model a spec describes (its bundle read through the installed reader when named by a string). */
export function profileModel(spec: ProfileTiming, name = 'timing'): ProfileModel {
  checkProfileSpec(spec as unknown as Record<string, unknown>, name);
  const { kind: _kind, profile, ...rest } = spec;
  const bundle = resolveProfile(`${name}.profile`, profile);
  return new ProfileModel(bundle, profileParameters(bundle, rest, name));
}
