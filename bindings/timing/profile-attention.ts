// The attention table of a profile bundle (docs/timing.md, attention): one
// layer's attention kernel for a step of one prefill chunk (prefill_chunk
// tokens after kv_prefill tokens of history) beside n_decode decodes of
// kv_decode tokens of context each, on a grid that doubles along every axis.
// Looked up multilinearly, one axis at a time, with the curve rule of
// curve.ts on each (constant below, linear between, the top octave's slope
// above).

import { cellNumber, readCsv } from './bundle-csv.js';
import { along, curveAt, curveOf, type At, type Curve } from './curve.js';

/** The measurements at one (prefill_chunk, n_decode): per kv_prefill value, a curve over kv_decode. */
export interface AttentionSlice {
  readonly kp: Float64Array;
  readonly kd: Curve[];
}

/** One prefill_chunk value: its n_decode axis and a slice at each (null: the empty step, 0 us). */
export interface AttentionRow {
  readonly pc: number;
  readonly nd: Float64Array;
  readonly slices: Array<AttentionSlice | null>;
}

export interface AttentionGrid {
  /** prefill_chunk values, increasing, 0 first. */
  readonly pc: Float64Array;
  readonly rows: AttentionRow[];
}

const COLUMNS = ['prefill_chunk', 'kv_prefill', 'n_decode', 'kv_decode', 'time_us'] as const;

/**
 * The grid from attention.csv. `pcGrid` and `ndGrid` are the doubling axes
 * the bundle declares (meta.yaml attention_grid; undefined: every value the
 * file has): slices off them (the skew sweep's extra 1.5x points) are not
 * used, as they fill only some of the grid. A row's n_decode axis is the
 * declared values it has slices for, so a row the profiler stopped short of
 * (no prefill beside 256 decodes) extends its own last octave.
 */
export function parseAttention(where: string, text: string, pcGrid?: readonly number[], ndGrid?: readonly number[]): AttentionGrid {
  const t = readCsv(where, text, COLUMNS);
  const slices = new Map<number, Map<number, Map<number, Map<number, [number, number]>>>>(); // pc -> nd -> kp -> kd -> [us, line]
  t.rows.forEach((r, i) => {
    const line = t.lines[i]!;
    const [pc, kp, nd, kd] = [0, 1, 2, 3].map((c) => cellNumber(where, line, COLUMNS[c]!, r[c]!, 0, true)) as [number, number, number, number];
    const us = cellNumber(where, line, 'time_us', r[4]!, 0, false);
    const byNd = slices.get(pc) ?? slices.set(pc, new Map()).get(pc)!;
    const byKp = byNd.get(nd) ?? byNd.set(nd, new Map()).get(nd)!;
    const byKd = byKp.get(kp) ?? byKp.set(kp, new Map()).get(kp)!;
    const seen = byKd.get(kd);
    if (seen !== undefined) throw new RangeError(`${where} line ${line}: (${pc}, ${kp}, ${nd}, ${kd}) is measured twice (line ${seen[1]})`);
    byKd.set(kd, [us, line]);
  });
  const onGrid = (grid: readonly number[] | undefined, v: number) => grid === undefined || grid.includes(v);
  const pcs = [...slices.keys()].filter((pc) => onGrid(pcGrid, pc)).sort((a, b) => a - b);
  if (pcs[0] !== 0) throw new RangeError(`${where}: no decode-only measurements (prefill_chunk 0)`);
  if (pcs.length < 2) throw new RangeError(`${where}: no prefill measurements (prefill_chunk > 0) on the grid`);
  const rows = pcs.map((pc): AttentionRow => {
    const byNd = slices.get(pc)!;
    const nds = [...byNd.keys()].filter((nd) => onGrid(ndGrid, nd)).sort((a, b) => a - b);
    const out: Array<[number, AttentionSlice | null]> = nds.map((nd) => {
      const byKp = byNd.get(nd)!;
      const kps = [...byKp.keys()].sort((a, b) => a - b);
      return [nd, {
        kp: Float64Array.from(kps),
        kd: kps.map((kp) => {
          const pts = [...byKp.get(kp)!.entries()].sort((a, b) => a[0] - b[0]);
          return curveOf(Float64Array.from(pts, (p) => p[0]), Float64Array.from(pts, (p) => p[1][0]));
        }),
      }];
    });
    // The empty step (no prefill, no decode) takes no attention at all.
    if (pc === 0 && nds[0] !== 0) out.unshift([0, null]);
    if (out.length === 0) throw new RangeError(`${where}: prefill_chunk ${pc} has no measurements on the n_decode grid`);
    return { pc, nd: Float64Array.from(out, (o) => o[0]), slices: out.map((o) => o[1]) };
  });
  return { pc: Float64Array.from(pcs), rows };
}

const kdRow: At<AttentionSlice> = (s, i, kd) => curveAt(s.kd[i]!, kd);

function sliceAt(s: AttentionSlice | null, kp: number, kd: number): number {
  return s === null ? 0 : along(s.kp, kp, kdRow, s, kd, 0, 0);
}

// Corners with no prefill (or no decode) carry no history of that part.
const ndPoint: At<AttentionRow> = (row, j, kp, kd) => sliceAt(row.slices[j]!, kp, row.nd[j]! > 0 ? kd : 0);

const pcPoint: At<AttentionGrid> = (g, i, kp, nd, kd) => {
  const row = g.rows[i]!;
  return along(row.nd, nd, ndPoint, row, row.pc > 0 ? kp : 0, kd, 0);
};

/**
 * One layer's attention, us: a prefill part of `pc` tokens after `kp`
 * tokens of history beside `nd` decodes of `kd` tokens of context each
 * (0: none of that part). At least 0.
 */
export function attentionUs(g: AttentionGrid, pc: number, kp: number, nd: number, kd: number): number {
  if (pc <= 0 && nd <= 0) return 0;
  return Math.max(0, along(g.pc, pc, pcPoint, g, kp, nd, kd));
}

/** The largest prefill_chunk measured: longer chunks are timed as pieces of it (docs/timing.md). */
export function topChunk(g: AttentionGrid): number {
  return g.pc[g.pc.length - 1]!;
}
