// A profiled timing table from a file (docs/timing.md): .json or .csv. Node only.

import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { parseTimingTable } from '../timing/timing-table.js';
import type { TableTiming } from '../timing/timing-model.js';
import { describe } from '../validate.js';

export function readTimingFile(path: string): TableTiming {
  if (typeof path !== 'string' || path === '') throw new TypeError(`path must be a non-empty string, got ${describe(path)}`);
  const format = /\.json$/i.test(path) ? 'json' : /\.csv$/i.test(path) ? 'csv' : null;
  if (format === null) throw new RangeError(`timing table ${JSON.stringify(path)}: the file must end in .json or .csv`);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new Error(`timing table ${JSON.stringify(path)}: ${(e as Error).message}`);
  }
  try {
    const t = parseTimingTable(text, format);
    return { ...t, name: t.name ?? basename(path) }; // the model's name says which file made it
  } catch (e) {
    const E = e instanceof RangeError ? RangeError : TypeError;
    throw new E(`${path}: ${(e as Error).message}`);
  }
}
