// `kvpool validate`'s output: the settings with where each came from, then
// measured against predicted for TTFT, TPOT, ITL and E2E (mean, p50, p90,
// p95, p99, difference in %), with the peer simulator's prediction beside
// them when the run has one; or the same as JSON.

import { FIGURE_KEYS, STAT_KEYS, type FigureKey, type StatKey } from '../measured/measured-figures.js';
import type { Validation } from '../measured/validate-run.js';
import { columnWidths } from './format.js';
import { fixed } from '../number-text.js';

const NAMES: Record<FigureKey, string> = { ttftMs: 'TTFT', tpotMs: 'TPOT', itlMs: 'ITL', e2eMs: 'E2E' };
const PEER: Partial<Record<FigureKey, 'ttftMs' | 'tpotMs' | 'e2eMs'>> = { ttftMs: 'ttftMs', tpotMs: 'tpotMs', e2eMs: 'e2eMs' };

const ms = (v: number | null | undefined) => (v === null || v === undefined ? '-' : fixed(v, 1));
const pct = (v: number | null | undefined) => (v === null || v === undefined ? '-' : `${v > 0 ? '+' : ''}${v.toFixed(2)}`);

/** The comparison as rows: figure, stat, measured, kvpool, diff %, and the peer's two columns when there is a peer. */
export function validationRows(v: Validation): { head: string[]; rows: string[][] } {
  const peer = v.peer;
  const head = ['figure (ms)', '', 'measured', 'kvpool', 'diff %', ...(peer ? [`${peer.simulator}`, 'diff %'] : [])];
  const rows: string[][] = [];
  for (const k of FIGURE_KEYS) {
    for (const s of STAT_KEYS) {
      const m = v.measured[k][s];
      const p = v.predicted[k][s];
      const pk = PEER[k];
      const peerV = peer && pk ? peer.predicted[pk][s as StatKey] : undefined;
      const peerD = peer && pk ? peer.differencePct[pk][s as StatKey] : undefined;
      rows.push([
        s === 'mean' ? NAMES[k] : '',
        s,
        ms(m),
        ms(p),
        pct(v.differencePct[k][s]),
        ...(peer ? [ms(peerV), peerD === undefined ? '-' : `${peerD > 0 ? '+' : ''}${peerD.toFixed(1)}`] : []),
      ]);
    }
  }
  return { head, rows };
}

/** The text for people. */
export function formatValidation(v: Validation): string {
  const s = v.settings;
  const src = (x: { value: unknown; source: string }) => `${String(x.value)} (${x.source})`;
  const lines = [
    `kvpool validate: ${v.run}, ${v.requests.toLocaleString('en-US')} requests of ${v.model}`,
    `  timing: ${s.timing}`,
    `    cpu overhead ${s.cpuOverheadMs.value} ms (${s.cpuOverheadMs.source})`,
    `    link latency ${s.linkLatencyUs.value} us, bandwidth ${s.linkGBps.value} GB/s (${s.linkLatencyUs.source === s.linkGBps.source ? s.linkLatencyUs.source : `${s.linkLatencyUs.source}; ${s.linkGBps.source}`})`,
    `  engine: ${s.engine}; TP ${src(s.tp)}; DP ${src(s.dp)}; expert parallel ${s.expertParallel.value ? 'on' : 'off'}`,
    `    max_num_seqs ${src(s.maxNumSeqs)}; max_num_batched_tokens ${src(s.maxNumBatchedTokens)}; block size ${src(s.blockSize)}`,
    `    KV blocks per rank ${s.numBlocks.value.toLocaleString('en-US')} = ${s.kvGibPerGpu} GiB per GPU (${s.numBlocks.source})`,
    `  replay: ${v.replay.steps.toLocaleString('en-US')} engine steps, ${v.replay.preemptions} preemptions, ${v.replay.rejected} rejected, ${v.replay.truncated} truncated; last token at ${(v.replay.makespanMs / 1000).toFixed(2)} s (measured ${(v.replay.measuredMakespanMs / 1000).toFixed(2)} s)`,
    '',
  ];
  const { head, rows } = validationRows(v);
  const w = columnWidths(head, rows);
  const line = (cells: string[]) => '  ' + cells.map((x, c) => (c < 2 ? x.padEnd(w[c]!) : x.padStart(w[c]!))).join('  ');
  lines.push(line(head));
  rows.forEach((r, i) => {
    if (i > 0 && i % STAT_KEYS.length === 0) lines.push('');
    lines.push(line(r));
  });
  lines.push('');
  for (const n of v.notes) lines.push(`  note: ${n}`);
  return lines.join('\n') + '\n';
}

/** The JSON: everything but the per-request and per-second arrays (the report draws those). */
export function validationJson(v: Validation): object {
  const { perRequest: _p, series: _s, ...rest } = v;
  return rest;
}
