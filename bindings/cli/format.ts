// Output of replay results: an aligned table for people (hit rates in
// percent), CSV and JSON / JSON Lines for programs (fractions, every field).

import { stringify } from 'csv-stringify/sync';
import type { ReplayConfig, ReplayRun } from '../replay/replay.js';
import { CONFIG_GLOSSARY, RANK_GLOSSARY, RESULT_GLOSSARY, SUB_MANAGER_GLOSSARY } from './glossary.js';

export const FORMATS = ['table', 'json', 'jsonl', 'csv'] as const;
export type OutputFormat = (typeof FORMATS)[number];

/** "1 request", "12,031 requests". */
export function count(n: number, noun: string): string {
  return `${n.toLocaleString('en-US')} ${noun}${n === 1 ? '' : 's'}`;
}

/** `x` with `digits` decimals and thousands separators, as the tables' other figures (7,962.20, not 7962.20). */
export { fixed } from '../number-text.js';

/** A fraction as a percentage for people: 0.0543 -> "5.43 %". */
export function percent(x: number): string {
  return `${(x * 100).toFixed(2)} %`;
}

/** The value at a dotted path ("config.numBlocks") of a result, or undefined. */
export function get(obj: unknown, path: string): unknown {
  let v: unknown = obj;
  for (const k of path.split('.')) v = v === null || v === undefined ? undefined : (v as Record<string, unknown>)[k];
  return v;
}

function cell(key: string, v: unknown): string {
  if (v === null || v === undefined) return '-';
  if (typeof v === 'boolean') return v ? 'yes' : 'no';
  if (Array.isArray(v)) return v.join(',');
  if (typeof v === 'number') {
    if (key === 'hitRate') return percent(v);
    if (key === 'seconds') return v.toFixed(3);
    return v.toLocaleString('en-US');
  }
  return String(v);
}

/** The configuration on one line: "block size 16 · blocks per rank 65536 · ...". Unset modes are left out. */
export function formatConfig(c: Partial<ReplayConfig>): string {
  const parts: string[] = [];
  for (const e of CONFIG_GLOSSARY) {
    const k = e.key.slice('config.'.length) as keyof ReplayConfig;
    if (k === 'trace') continue;
    const v = c[k];
    // Unset modes, and the xllm engine's modes in a vLLM fleet's configuration (absent there).
    if (v === null || v === undefined || (k === 'hostBlocks' && v === 0)) continue;
    parts.push(`${e.label} ${Array.isArray(v) ? v.join(',') : typeof v === 'boolean' ? (v ? 'yes' : 'no') : String(v)}`);
  }
  return parts.join(' · ');
}

/** Each column's width: its widest cell, head included (a loop, not a spread: a sweep may have any number of rows). */
export function columnWidths(head: readonly string[], rows: ReadonlyArray<readonly string[]>): number[] {
  return head.map((h, c) => rows.reduce((m, r) => Math.max(m, r[c]!.length), h.length));
}

function grid(head: string[], rows: string[][], leftCols = 1): string[] {
  const w = columnWidths(head, rows);
  const line = (cells: string[]) => '  ' + cells.map((x, c) => (c < leftCols ? x.padEnd(w[c]!) : x.padStart(w[c]!))).join('  ');
  return [line(head), ...rows.map(line)];
}

/** One result as a table: title, configuration, figures, then sub-managers and ranks when there are. */
export function formatRun(r: ReplayRun, title: string): string {
  const rows: Array<[string, string]> = [];
  for (const e of RESULT_GLOSSARY) {
    const v = get(r, e.key);
    if (v !== undefined) rows.push([e.label, cell(e.key.split('.').pop()!, v)]);
  }
  const w = Math.max(...rows.map(([k]) => k.length));
  const vw = Math.max(...rows.map(([, v]) => v.length));
  const out = [title, `  ${formatConfig(r.config)}`, '', ...rows.map(([k, v]) => `  ${k.padEnd(w)}  ${v.padStart(vw)}`)];
  if (r.mode === 'composite') {
    const head = ['sub-manager', ...SUB_MANAGER_GLOSSARY.map((e) => e.label)];
    const body = r.subManagers.map((s, i) => [String(i), s.kind, ...[s.blockSize, s.numBlocks, s.peakUsedBlocks, s.allocatedBlocks, s.releasedBlocks].map((x) => x.toLocaleString('en-US'))]);
    out.push('', ...grid(head, body, 2));
  }
  if (r.ranks.length > 1) {
    const head = RANK_GLOSSARY.map((e) => e.label);
    const body = r.ranks.map((k) => [k.dpRank, k.lookups, k.queriedBlocks, k.hitBlocks, k.evictedBlocks, k.allocatedBlocks, k.peakUsedBlocks].map((x) => x.toLocaleString('en-US')));
    out.push('', ...grid(head, body));
  }
  return out.join('\n');
}

/** The flat columns of a result: config.*, then every figure (nested parts dotted; per-rank and sub-manager rows are JSON-only). */
export function csvColumns(runs: readonly ReplayRun[]): string[] {
  const cols = CONFIG_GLOSSARY.map((e) => e.key);
  for (const e of RESULT_GLOSSARY) if (runs.some((r) => get(r, e.key) !== undefined)) cols.push(e.key);
  cols.push('warnings');
  return cols;
}

/** Results as CSV with a header row; fractions stay fractions, lists are joined with ';'. */
export function formatCsv(runs: readonly ReplayRun[]): string {
  return csvOf(runs, csvColumns(runs));
}

/** CSV of `runs`, one row each, one column per dotted path in `cols` (lists joined; warnings with " | "). */
export function csvOf(runs: readonly unknown[], cols: readonly string[]): string {
  const rows = runs.map((r) =>
    cols.map((k) => {
      const v = get(r, k);
      if (v === null || v === undefined) return '';
      if (Array.isArray(v)) return v.join(k === 'warnings' ? ' | ' : ';');
      return v as string | number | boolean;
    }),
  );
  return stringify([cols, ...rows], { cast: { boolean: (b) => (b ? 'true' : 'false') } });
}

/** One JSON object per line. */
export function formatJsonLines(runs: readonly ReplayRun[]): string {
  return runs.map((r) => JSON.stringify(r) + '\n').join('');
}

/** "1-6, 9": the numbers as ranges. */
export function ranges(ns: number[]): string {
  const out: string[] = [];
  for (let i = 0; i < ns.length; ) {
    let j = i;
    while (j + 1 < ns.length && ns[j + 1] === ns[j]! + 1) j++;
    out.push(j > i ? `${ns[i]}-${ns[j]}` : String(ns[i]));
    i = j + 1;
  }
  return out.join(', ');
}
