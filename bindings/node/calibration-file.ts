// Calibration files (docs/validation.md, the calibration file; Node only):
// what `kvpool calibrate` writes and `--calibration FILE` reads back.

import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { parseCalibration, type Calibration } from '../timing/calibration.js';
import { describe } from '../validate.js';

/** The largest calibration file read (one is a few KiB). */
export const MAX_CALIBRATION_FILE_BYTES = 1024 * 1024;

/** Reads and checks a calibration file; a refusal names the file and the field. */
export function readCalibrationFile(path: string, where = `calibration ${JSON.stringify(path)}`): Calibration {
  if (typeof path !== 'string' || path === '') throw new TypeError(`calibration file must be a path, got ${describe(path)}`);
  let st;
  try {
    st = statSync(path);
  } catch {
    throw new Error(`${where}: no such file`);
  }
  if (!st.isFile()) throw new Error(`${where}: not a regular file`);
  if (st.size > MAX_CALIBRATION_FILE_BYTES) throw new RangeError(`${where}: ${st.size} bytes, more than a calibration file may (${MAX_CALIBRATION_FILE_BYTES})`);
  return parseCalibration(readFileSync(path, 'utf8'), where);
}

/** Writes a calibration as the file format has it (JSON, two-space indent). */
export function writeCalibrationFile(path: string, c: Calibration): void {
  if (typeof path !== 'string' || path === '') throw new TypeError(`calibration file must be a path, got ${describe(path)}`);
  writeFileSync(path, `${JSON.stringify(parseCalibration(c), null, 2)}\n`);
}
