// Profiled tables of measured step times, as JSON or CSV (docs/timing.md,
// profiled tables), read into the table model's spec. Refusals name the line
// or field.

import { describe } from '../validate.js';
import { parseTable, type ParsedTable } from './table-model.js';

/**
 * A table model from text. JSON: `{ "prefill": [[tokens, ms], ...],
 * "decode": [[seqs, ms], ...] }` plus the table spec's optional fields;
 * CSV: a header `phase,x,ms`, then one line per point, phase `prefill` or
 * `decode` (points in any order; sorted by x).
 */
export function parseTimingTable(text: string, format: 'json' | 'csv'): ParsedTable {
  if (typeof text !== 'string') throw new TypeError(`text must be a string, got ${describe(text)}`);
  // A byte-order mark (as some editors save) is not part of the table, in either format.
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  if (format === 'json') {
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch (e) {
      throw new TypeError(`timing table: not JSON: ${(e as Error).message}`);
    }
    if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new TypeError(`timing table: must be a JSON object with "prefill" and "decode", got ${describe(v)}`);
    return parseTable({ kind: 'table', ...(v as object) }, 'timing table');
  }
  if (format !== 'csv') throw new RangeError(`format must be "json" or "csv", got ${describe(format)}`);
  const lines = text.split(/\r?\n/).map((l) => l.trim());
  const header = lines[0]?.toLowerCase().replace(/\s/g, '');
  if (header !== 'phase,x,ms') throw new TypeError(`timing table line 1: the header must be "phase,x,ms", got ${JSON.stringify(lines[0] ?? '')}`);
  const curves: Record<'prefill' | 'decode', Array<[number, number]>> = { prefill: [], decode: [] };
  const seen = { prefill: new Map<number, number>(), decode: new Map<number, number>() };
  lines.forEach((l, i) => {
    if (i === 0 || l === '' || l.startsWith('#')) return;
    const cells = l.split(',').map((c) => c.trim());
    if (cells.length !== 3) throw new TypeError(`timing table line ${i + 1}: must be phase,x,ms, got ${JSON.stringify(l)}`);
    const [phase, x, ms] = cells as [string, string, string];
    if (phase !== 'prefill' && phase !== 'decode') throw new RangeError(`timing table line ${i + 1}: phase must be prefill or decode, got ${JSON.stringify(phase)}`);
    const num = (what: string, s: string, min: number) => {
      const n = s === '' ? NaN : Number(s);
      if (!Number.isFinite(n)) throw new RangeError(`timing table line ${i + 1}: ${what} must be a number, got ${JSON.stringify(s)}`);
      if (n < min) throw new RangeError(`timing table line ${i + 1}: ${what} must be at least ${min}, got ${n}`);
      return n;
    };
    const at = num('x', x, 1);
    const twice = seen[phase].get(at);
    if (twice !== undefined) throw new RangeError(`timing table line ${i + 1}: ${phase} x ${at} is given twice (line ${twice})`);
    seen[phase].set(at, i + 1);
    curves[phase].push([at, num('ms', ms, 0)]);
  });
  for (const c of Object.values(curves)) c.sort((a, b) => a[0] - b[0]);
  return parseTable({ kind: 'table', ...curves }, 'timing table');
}
