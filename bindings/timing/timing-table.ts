// Profiled tables of measured step times, as JSON or CSV (docs/timing.md,
// profiled tables), read into the table model's spec. Refusals name the line
// or field.

import { describe } from '../validate.js';
import { parseTimingSpec, type TableTiming } from './timing-model.js';

/**
 * A table model from text. JSON: `{ "prefill": [[tokens, ms], ...],
 * "decode": [[seqs, ms], ...] }` plus the table spec's optional fields;
 * CSV: a header `phase,x,ms`, then one line per point, phase `prefill` or
 * `decode` (points in any order; sorted by x).
 */
export function parseTimingTable(text: string, format: 'json' | 'csv'): TableTiming {
  if (typeof text !== 'string') throw new TypeError(`text must be a string, got ${describe(text)}`);
  if (format === 'json') {
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch (e) {
      throw new TypeError(`timing table: not JSON: ${(e as Error).message}`);
    }
    if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new TypeError(`timing table: must be a JSON object with "prefill" and "decode", got ${describe(v)}`);
    return parseTimingSpec({ kind: 'table', ...(v as object) }, 'timing table') as TableTiming;
  }
  if (format !== 'csv') throw new RangeError(`format must be "json" or "csv", got ${describe(format)}`);
  const lines = text.split(/\r?\n/).map((l) => l.trim());
  const header = lines[0]?.toLowerCase().replace(/\s/g, '');
  if (header !== 'phase,x,ms') throw new TypeError(`timing table line 1: the header must be "phase,x,ms", got ${JSON.stringify(lines[0] ?? '')}`);
  const curves: Record<'prefill' | 'decode', Array<[number, number]>> = { prefill: [], decode: [] };
  lines.forEach((l, i) => {
    if (i === 0 || l === '' || l.startsWith('#')) return;
    const cells = l.split(',').map((c) => c.trim());
    if (cells.length !== 3) throw new TypeError(`timing table line ${i + 1}: must be phase,x,ms, got ${JSON.stringify(l)}`);
    const [phase, x, ms] = cells as [string, string, string];
    if (phase !== 'prefill' && phase !== 'decode') throw new RangeError(`timing table line ${i + 1}: phase must be prefill or decode, got ${JSON.stringify(phase)}`);
    const num = (what: string, s: string) => {
      const n = s === '' ? NaN : Number(s);
      if (!Number.isFinite(n)) throw new RangeError(`timing table line ${i + 1}: ${what} must be a number, got ${JSON.stringify(s)}`);
      return n;
    };
    curves[phase].push([num('x', x), num('ms', ms)]);
  });
  for (const c of Object.values(curves)) c.sort((a, b) => a[0] - b[0]);
  return parseTimingSpec({ kind: 'table', ...curves }, 'timing table') as TableTiming;
}
