// Measured runs from disk (docs/validation.md, the run format; Node only): a
// run folder of one's own, or one of the runs shipped in the package's
// measured/ folder by its name.

import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseMeasuredRun, type MeasuredRun, type MeasuredRunFiles } from '../measured/run-format.js';
import { describe } from '../validate.js';

const MEASURED_ROOT = fileURLToPath(new URL('../../measured/', import.meta.url));

/** The largest file of a run read. */
export const MAX_RUN_FILE_BYTES = 256 * 1024 * 1024;

/** The runs shipped in the package (measured/README.md says where they come from): name -> folder. */
export const MEASURED_RUNS: Readonly<Record<string, string>> = Object.freeze(
  Object.fromEntries(
    (() => {
      try {
        return readdirSync(MEASURED_ROOT, { withFileTypes: true })
          .filter((e) => e.isDirectory())
          .map((e) => [e.name, join(MEASURED_ROOT, e.name)]);
      } catch {
        return [];
      }
    })(),
  ),
);

function readOptional(path: string, where: string): string | undefined {
  let st;
  try {
    st = statSync(path);
  } catch {
    return undefined;
  }
  if (!st.isFile()) throw new Error(`${where}: ${path} is not a regular file`);
  if (st.size > MAX_RUN_FILE_BYTES) throw new RangeError(`${where}: ${path} has ${st.size} bytes, more than a run's file may (${MAX_RUN_FILE_BYTES})`);
  return readFileSync(path, 'utf8');
}

/**
 * Reads a run folder (meta.json, requests.jsonl, timeseries.csv; config.json
 * and llmservingsim-summary.txt if there), or a shipped run by its name, and
 * checks every field (parseMeasuredRun).
 */
export function readMeasuredRun(dirOrName: string): MeasuredRun {
  if (typeof dirOrName !== 'string' || dirOrName === '') throw new TypeError(`run must be a run folder or the name of a shipped run, got ${describe(dirOrName)}`);
  const shipped = MEASURED_RUNS[dirOrName];
  const dir = shipped ?? resolve(dirOrName);
  const name = shipped !== undefined ? dirOrName : dirOrName.replace(/\/+$/, '');
  const where = `run ${JSON.stringify(name)}`;
  let st;
  try {
    st = statSync(dir);
  } catch {
    const known = Object.keys(MEASURED_RUNS);
    throw new Error(`${where}: no such folder${known.length > 0 ? ` (shipped runs: ${known.join(', ')})` : ''}`);
  }
  if (!st.isDirectory()) throw new Error(`${where}: ${dir} is not a folder (a run folder holds meta.json, requests.jsonl and timeseries.csv)`);
  const files: Partial<MeasuredRunFiles> = { name };
  for (const [key, file] of [['meta', 'meta.json'], ['requests', 'requests.jsonl'], ['timeseries', 'timeseries.csv'], ['config', 'config.json'], ['peer', 'llmservingsim-summary.txt']] as const) {
    const text = readOptional(join(dir, file), where);
    if (text === undefined) {
      if (key === 'meta' || key === 'requests' || key === 'timeseries') throw new Error(`${where}: ${join(dir, file)} is missing (a run folder holds meta.json, requests.jsonl and timeseries.csv)`);
      continue;
    }
    files[key] = text;
  }
  return parseMeasuredRun(files as MeasuredRunFiles);
}
