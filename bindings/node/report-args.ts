// A report's arguments, checked before anything is drawn: a report is made
// from what a sweep returned, and a hand-built call should fail naming the
// argument, not deep inside the chart code.

import { describe } from '../validate.js';

/** Throws unless `runs` is a non-empty array of results (each with its `config`) and `varied` lists option names of `known`. */
export function checkReportArgs(runs: unknown, varied: unknown, known: readonly string[]): void {
  if (!Array.isArray(runs)) throw new TypeError(`runs must be an array of results, got ${describe(runs)}`);
  if (runs.length === 0) throw new RangeError('a report needs at least one result');
  runs.forEach((r: unknown, i) => {
    const config = r !== null && typeof r === 'object' ? (r as { config?: unknown }).config : undefined;
    if (config === null || typeof config !== 'object') throw new TypeError(`runs[${i}] must be a result with its config, got ${describe(r)}`);
  });
  if (!Array.isArray(varied)) throw new TypeError(`varied must be an array of option names, got ${describe(varied)}`);
  varied.forEach((k: unknown, i) => {
    if (typeof k !== 'string' || !known.includes(k)) throw new RangeError(`varied[${i}] must be one of ${known.join(', ')}, got ${describe(k)}`);
  });
}
