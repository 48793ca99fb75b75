// A timing model from a file (docs/timing.md): a profiled table (.json or
// .csv) or, for a .json holding "kind", a timing spec. Node only. A file is
// read once, only when it is a regular file, and only up to
// MAX_TIMING_FILE_BYTES: a named pipe cannot be read twice (nor once without
// a writer), and a huge file would be read whole before its first line is
// judged.

import { closeSync, constants, fstatSync, openSync, readSync, statSync, type Stats } from 'node:fs';
import { basename, dirname, isAbsolute, resolve } from 'node:path';
import { PROFILE_PRESETS } from './profile-files.js';
import { parseTimingTable } from '../timing/timing-table.js';
import { parseTimingSpec, type TableTiming, type TimingSpecInput } from '../timing/timing-model.js';
import { describe, restated } from '../validate.js';

/**
 * The largest timing file read: 16 MiB. A profiled table is a few kilobytes
 * (a point a line, ~20 bytes); this holds hundreds of thousands of points.
 */
export const MAX_TIMING_FILE_BYTES = 16 << 20;

/** "a named pipe", "a directory": what a path is when it is not a regular file. */
function kindOf(s: Stats): string {
  if (s.isDirectory()) return 'a directory';
  if (s.isFIFO()) return 'a named pipe';
  if (s.isSocket()) return 'a socket';
  if (s.isCharacterDevice() || s.isBlockDevice()) return 'a device';
  return 'not a regular file';
}

function checkRegular(s: Stats, name: string): void {
  if (!s.isFile()) throw new RangeError(`${name}: ${kindOf(s)}, not a regular file; a timing table or spec is read from a .json or .csv file`);
  if (s.size > MAX_TIMING_FILE_BYTES) throw new RangeError(`${name}: ${s.size.toLocaleString('en-US')} bytes, more than a timing file may hold (${MAX_TIMING_FILE_BYTES.toLocaleString('en-US')} bytes, 16 MiB)`);
}

/**
 * The text of a timing file, read once: a regular file of at most
 * MAX_TIMING_FILE_BYTES (a leading UTF-8 byte-order mark dropped). `name`
 * starts every refusal.
 */
export function readTimingText(path: string, name: string): string {
  let fd: number;
  try {
    // Judged before it is opened: opening a named pipe waits for a writer.
    checkRegular(statSync(path), name);
    // O_NONBLOCK: should the path become a pipe in between, open does not wait (fstat then refuses it).
    fd = openSync(path, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0));
  } catch (e) {
    if (e instanceof RangeError) throw e;
    const code = (e as NodeJS.ErrnoException).code;
    throw new Error(`${name}: ${code === 'ENOENT' ? 'no such file' : (e as Error).message}`);
  }
  try {
    checkRegular(fstatSync(fd), name);
    // At most one byte past the limit: a file that grew since it was judged is refused, not read whole.
    const buf = Buffer.allocUnsafe(MAX_TIMING_FILE_BYTES + 1);
    let n = 0;
    for (let got = 1; got > 0 && n < buf.length; n += got) got = readSync(fd, buf, n, buf.length - n, null);
    if (n > MAX_TIMING_FILE_BYTES) throw new RangeError(`${name}: more than a timing file may hold (${MAX_TIMING_FILE_BYTES.toLocaleString('en-US')} bytes, 16 MiB)`);
    const text = buf.toString('utf8', 0, n);
    return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  } finally {
    closeSync(fd);
  }
}

function formatOf(path: string): 'json' | 'csv' | null {
  return /\.json$/i.test(path) ? 'json' : /\.csv$/i.test(path) ? 'csv' : null;
}

/** A profiled table from a .json or .csv file (docs/timing.md, profiled tables). */
export function readTimingFile(path: string): TableTiming {
  if (typeof path !== 'string' || path === '') throw new TypeError(`path must be a non-empty string, got ${describe(path)}`);
  const format = formatOf(path);
  if (format === null) throw new RangeError(`timing table ${JSON.stringify(path)}: the file must end in .json or .csv`);
  const text = readTimingText(path, `timing table ${JSON.stringify(path)}`);
  try {
    const t = parseTimingTable(text, format);
    return { ...t, name: t.name ?? basename(path) }; // the model's name says which file made it
  } catch (e) {
    throw restated(e, `${path}: ${(e as Error).message}`, TypeError);
  }
}

/**
 * A profile spec's bundle folder, when a relative path, as seen from the
 * spec file's folder (where its writer sees it), not the current one; a
 * preset's name stays a name.
 */
function besideFile(spec: TimingSpecInput, file: string): TimingSpecInput {
  if (spec.kind !== 'profile' || typeof spec.profile !== 'string' || isAbsolute(spec.profile)) return spec;
  if (PROFILE_PRESETS[spec.profile.toLowerCase()] !== undefined) return spec;
  return { ...spec, profile: resolve(dirname(resolve(file)), spec.profile) };
}

/**
 * What `kvpool fleet --timing FILE` takes, read once: a .json holding an
 * object with "kind" is a timing spec (a polynomial's coefficients, or a
 * table); any other .json, or a .csv, is a profiled table. A profile
 * spec's relative bundle folder is resolved against the file's folder.
 * `name` starts every refusal (default: the path).
 */
export function readTimingSpecFile(path: string, name = JSON.stringify(path)): TimingSpecInput {
  if (typeof path !== 'string' || path === '') throw new TypeError(`path must be a non-empty string, got ${describe(path)}`);
  const format = formatOf(path);
  if (format === null) throw new RangeError(`${name}: the file must end in .json or .csv`);
  const text = readTimingText(path, name);
  try {
    if (format === 'json') {
      let v: unknown;
      try {
        v = JSON.parse(text);
      } catch {
        v = undefined; // the table's parser says what is wrong with the text
      }
      if (v !== null && typeof v === 'object' && !Array.isArray(v) && 'kind' in v) return besideFile(parseTimingSpec(v, 'timing') as TimingSpecInput, path);
    }
    const t = parseTimingTable(text, format);
    return { ...t, name: t.name ?? basename(path) }; // the model's name says which file made it
  } catch (e) {
    throw restated(e, `${name}: ${(e as Error).message}`, TypeError);
  }
}
