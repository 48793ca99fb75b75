// Profile bundles from disk (docs/timing.md, the bundle; Node only): the
// presets shipped in the package's profiles/ (their CSV files gzipped) or a
// bundle folder of one's own, gzipped or not. Importing this module installs
// it as the reader of profiles named by a string, so a timing spec
// `{ kind: 'profile', profile: 'rtxpro6000/llama-3.1-8b' }` works wherever
// kvpool runs in Node.

import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { parse as parseYaml } from 'yaml';
import { parseProfileBundle, type ProfileBundle } from '../timing/profile-bundle.js';
import { setProfileReader } from '../timing/profile-source.js';
import { restated } from '../validate.js';

/** The presets shipped in the package: name -> bundle folder under profiles/ (profiles/README.md says where they come from). */
export const PROFILE_PRESETS: Readonly<Record<string, string>> = Object.freeze({
  'rtx4090/llama-3.1-8b': 'RTX4090/meta-llama/Llama-3.1-8B/bf16',
  'rtxpro6000/llama-3.1-8b': 'RTXPRO6000/meta-llama/Llama-3.1-8B/bf16',
  'rtxpro6000/qwen3-32b': 'RTXPRO6000/Qwen/Qwen3-32B/bf16',
  'rtxpro6000/qwen3-30b-a3b': 'RTXPRO6000/Qwen/Qwen3-30B-A3B-Instruct-2507/bf16',
});

const PRESET_ROOT = fileURLToPath(new URL('../../profiles/', import.meta.url));

/** The largest file of a bundle read (the shipped ones are under 0.5 MB). */
export const MAX_PROFILE_FILE_BYTES = 64 * 1024 * 1024;

const LAYER_FILES = ['dense.csv', 'per_sequence.csv', 'attention.csv', 'moe.csv', 'skew_fit.csv'];

/** A regular file's text, or undefined when there is none; `name.gz` is read and unzipped when `name` is absent. */
function readText(path: string, where: string): string | undefined {
  for (const [p, gz] of [[path, false], [`${path}.gz`, true]] as const) {
    let st;
    try {
      st = statSync(p);
    } catch {
      continue;
    }
    if (!st.isFile()) throw new Error(`${where}: ${p} is not a regular file`);
    if (st.size > MAX_PROFILE_FILE_BYTES) throw new RangeError(`${where}: ${p} has ${st.size} bytes, more than a profile file may (${MAX_PROFILE_FILE_BYTES})`);
    const bytes = readFileSync(p);
    if (!gz) return bytes.toString('utf8');
    try {
      return gunzipSync(bytes, { maxOutputLength: MAX_PROFILE_FILE_BYTES }).toString('utf8');
    } catch (e) {
      throw new Error(`${where}: ${p}: ${(e as Error).message}`);
    }
  }
  return undefined;
}

function isFile(p: string): boolean {
  try {
    return statSync(p).isFile();
  } catch {
    return false;
  }
}

/** The first of dir and its parents (up to 5 levels) holding `rel` (or `rel.gz`). */
function upward(dir: string, rel: string): string | undefined {
  let d = dir;
  for (let i = 0; i <= 5; i++) {
    const p = join(d, rel);
    if (isFile(p) || isFile(`${p}.gz`)) return p;
    const up = dirname(d);
    if (up === d) break;
    d = up;
  }
  return undefined;
}

/**
 * The calibration.json that goes with a bundle folder: in it, or in a folder
 * above it up to the root of its tree (the folder holding models/), as the
 * presets keep one per GPU (profiles/RTXPRO6000/calibration.json).
 */
function calibrationOf(dir: string): string | undefined {
  let d = dir;
  for (let i = 0; i <= 5; i++) {
    const p = join(d, 'calibration.json');
    if (isFile(p)) return p;
    if (isDir(join(d, 'models'))) return undefined;
    const up = dirname(d);
    if (up === d) break;
    d = up;
  }
  return undefined;
}

function isDir(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** Reads a bundle folder (meta.yaml, tp<N>/ folders; models/ and architectures/ in it or a folder above it; a calibration.json, if any, in it or a folder above it below models/). */
export function readProfileDir(dir: string, name = dir): ProfileBundle {
  const where = `profile ${JSON.stringify(name)}`;
  let st;
  try {
    st = statSync(dir);
  } catch {
    throw new Error(`${where}: no such preset or folder (presets: ${Object.keys(PROFILE_PRESETS).join(', ')})`);
  }
  if (!st.isDirectory()) throw new Error(`${where}: ${dir} is not a folder (a bundle folder holds meta.yaml and tp1/, tp2/, ...)`);
  const meta = readText(join(dir, 'meta.yaml'), where);
  if (meta === undefined) throw new Error(`${where}: ${dir} has no meta.yaml`);
  let m: Record<string, unknown>;
  try {
    m = (parseYaml(meta) ?? {}) as Record<string, unknown>;
  } catch (e) {
    throw new TypeError(`${where}: meta.yaml: not YAML: ${(e as Error).message.split('\n')[0]}`);
  }
  const model = String(m['model'] ?? '');
  const architecture = String(m['architecture'] ?? '');
  if (model === '' || architecture === '') throw new TypeError(`${where}: meta.yaml must name the model and the architecture`);
  const modelPath = upward(dir, join('models', `${model}.json`));
  const archPath = upward(dir, join('architectures', `${architecture}.yaml`));
  if (modelPath === undefined) throw new Error(`${where}: no models/${model}.json in the bundle folder or a folder above it`);
  if (archPath === undefined) throw new Error(`${where}: no architectures/${architecture}.yaml in the bundle folder or a folder above it`);
  const tp: Record<number, Record<string, string>> = {};
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const d = /^tp(\d+)$/.exec(entry.name);
    if (d === null || !entry.isDirectory()) continue;
    const files: Record<string, string> = {};
    for (const f of LAYER_FILES) {
      const text = readText(join(dir, entry.name, f), where);
      if (text !== undefined) files[f] = text;
    }
    tp[Number(d[1])] = files;
  }
  if (Object.keys(tp).length === 0) throw new Error(`${where}: ${dir} has no tp<N>/ folder`);
  const calibrationPath = calibrationOf(dir);
  const calibration = calibrationPath === undefined ? undefined : readText(calibrationPath, where);
  try {
    return parseProfileBundle({ name, meta, model: readText(modelPath, where)!, architecture: readText(archPath, where)!, tp, ...(calibration !== undefined && { calibration }) });
  } catch (e) {
    throw restated(e, `${where}: ${(e as Error).message}`, TypeError);
  }
}

const cache = new Map<string, { stamp: string; bundle: ProfileBundle }>();

/** When meta.yaml and the TP folders' files last changed ('' when the folder is not there). */
function stampOf(dir: string): string {
  const times: number[] = [];
  try {
    times.push(statSync(join(dir, 'meta.yaml')).mtimeMs);
    const cal = calibrationOf(dir);
    if (cal !== undefined) times.push(statSync(cal).mtimeMs);
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (!e.isDirectory() || !/^tp\d+$/.test(e.name)) continue;
      for (const f of readdirSync(join(dir, e.name))) times.push(statSync(join(dir, e.name, f)).mtimeMs);
    }
  } catch {
    return ''; // readProfileDir says what is missing
  }
  return times.join(',');
}

/**
 * A preset by name, or a bundle folder by path, parsed once per process
 * (again when one of its files changes).
 */
export function readProfileBundle(nameOrPath: string): ProfileBundle {
  const preset = PROFILE_PRESETS[nameOrPath.toLowerCase()];
  const dir = preset !== undefined ? join(PRESET_ROOT, preset) : resolve(nameOrPath);
  const name = preset !== undefined ? nameOrPath.toLowerCase() : nameOrPath;
  const stamp = stampOf(dir);
  const key = `${name}\0${dir}`;
  const hit = cache.get(key);
  if (hit !== undefined && stamp !== '' && hit.stamp === stamp) return hit.bundle;
  const bundle = readProfileDir(dir, name);
  cache.set(key, { stamp, bundle });
  return bundle;
}

setProfileReader(readProfileBundle);
