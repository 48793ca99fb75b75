// The attention table of a profile bundle (docs/timing.md, attention): one
// layer's attention kernel for a step of one prefill chunk (prefill_chunk
// tokens after kv_prefill tokens of history) beside n_decode decodes of
// kv_decode tokens of context each, on a grid that doubles along every axis.
// Looked up multilinearly, one axis at a time, with the curve rule of
// curve.ts on each (constant below, linear between, the top octave's slope
// above).

import { cellNumber, readCsv } from './bundle-csv.js';
import { curveAt, curveOf, segment, type Curve } from './curve.js';

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

// Each axis below is the curve rule of curve.ts written out once per level
// (not one generic function taking a callback): the lookup runs once per
// engine step, and a call site that sees one function is one V8 inlines.

/** The slice at kv_prefill kp, kv_decode kd. */
function sliceAt(s: AttentionSlice | null, kp: number, kd: number): number {
  if (s === null) return 0;
  const x = s.kp;
  const n = x.length;
  if (n === 1 || kp <= x[0]!) return curveAt(s.kd[0]!, kd);
  const last = x[n - 1]!;
  if (kp <= last) {
    const i = segment(x, kp);
    if (kp === x[i + 1]) return curveAt(s.kd[i + 1]!, kd);
    const a = curveAt(s.kd[i]!, kd);
    return a + ((kp - x[i]!) * (curveAt(s.kd[i + 1]!, kd) - a)) / (x[i + 1]! - x[i]!);
  }
  const yn = curveAt(s.kd[n - 1]!, kd);
  const xm = Math.max(last / 2, x[0]!);
  let ym: number;
  if (xm <= x[0]!) ym = curveAt(s.kd[0]!, kd);
  else {
    const i = segment(x, xm);
    const a = curveAt(s.kd[i]!, kd);
    ym = xm === x[i + 1] ? curveAt(s.kd[i + 1]!, kd) : a + ((xm - x[i]!) * (curveAt(s.kd[i + 1]!, kd) - a)) / (x[i + 1]! - x[i]!);
  }
  return yn + (kp - last) * Math.max(0, (yn - ym) / (last - xm));
}

/** Slice j of a row, a corner with no decode reading no decode context. */
function rowPoint(row: AttentionRow, j: number, kp: number, kd: number): number {
  return sliceAt(row.slices[j]!, kp, row.nd[j]! > 0 ? kd : 0);
}

/** A prefill_chunk row at n_decode nd. */
function rowAt(row: AttentionRow, nd: number, kp: number, kd: number): number {
  const x = row.nd;
  const n = x.length;
  if (n === 1 || nd <= x[0]!) return rowPoint(row, 0, kp, kd);
  const last = x[n - 1]!;
  if (nd <= last) {
    const i = segment(x, nd);
    if (nd === x[i + 1]) return rowPoint(row, i + 1, kp, kd);
    const a = rowPoint(row, i, kp, kd);
    return a + ((nd - x[i]!) * (rowPoint(row, i + 1, kp, kd) - a)) / (x[i + 1]! - x[i]!);
  }
  const yn = rowPoint(row, n - 1, kp, kd);
  const xm = Math.max(last / 2, x[0]!);
  let ym: number;
  if (xm <= x[0]!) ym = rowPoint(row, 0, kp, kd);
  else {
    const i = segment(x, xm);
    const a = rowPoint(row, i, kp, kd);
    ym = xm === x[i + 1] ? rowPoint(row, i + 1, kp, kd) : a + ((xm - x[i]!) * (rowPoint(row, i + 1, kp, kd) - a)) / (x[i + 1]! - x[i]!);
  }
  return yn + (nd - last) * Math.max(0, (yn - ym) / (last - xm));
}

/** Row i of the grid, a row with no prefill reading no prefill history. */
function gridPoint(g: AttentionGrid, i: number, kp: number, nd: number, kd: number): number {
  const row = g.rows[i]!;
  return rowAt(row, nd, row.pc > 0 ? kp : 0, kd);
}

/**
 * One layer's attention, us: a prefill part of `pc` tokens after `kp`
 * tokens of history beside `nd` decodes of `kd` tokens of context each
 * (0: none of that part). At least 0.
 */
export function attentionUs(g: AttentionGrid, pc: number, kp: number, nd: number, kd: number): number {
  if (pc <= 0 && nd <= 0) return 0;
  const x = g.pc;
  const n = x.length;
  let v: number;
  if (n === 1 || pc <= x[0]!) v = gridPoint(g, 0, kp, nd, kd);
  else if (pc <= x[n - 1]!) {
    const i = segment(x, pc);
    if (pc === x[i + 1]) v = gridPoint(g, i + 1, kp, nd, kd);
    else {
      const a = gridPoint(g, i, kp, nd, kd);
      v = a + ((pc - x[i]!) * (gridPoint(g, i + 1, kp, nd, kd) - a)) / (x[i + 1]! - x[i]!);
    }
  } else {
    const last = x[n - 1]!;
    const yn = gridPoint(g, n - 1, kp, nd, kd);
    const xm = Math.max(last / 2, x[0]!);
    let ym: number;
    if (xm <= x[0]!) ym = gridPoint(g, 0, kp, nd, kd);
    else {
      const i = segment(x, xm);
      const a = gridPoint(g, i, kp, nd, kd);
      ym = xm === x[i + 1] ? gridPoint(g, i + 1, kp, nd, kd) : a + ((xm - x[i]!) * (gridPoint(g, i + 1, kp, nd, kd) - a)) / (x[i + 1]! - x[i]!);
    }
    v = yn + (pc - last) * Math.max(0, (yn - ym) / (last - xm));
  }
  return Math.max(0, v);
}

/**
 * Decode-only attention as one curve over kv_decode per decode count
 * 1..max (the row prefill_chunk = 0 interpolated between its slices ahead
 * of time, which is exact when both slices share their kv_decode points);
 * undefined where they do not, for attentionUs to do.
 */
export function decodeCurves(g: AttentionGrid): Array<Curve | undefined> {
  const row = g.rows[0]!;
  const out: Array<Curve | undefined> = [undefined];
  const last = row.nd[row.nd.length - 1]!;
  const only = (s: AttentionSlice | null) => (s !== null && s.kp.length === 1 && s.kp[0] === 0 ? s.kd[0]! : undefined);
  for (let nd = 1; nd <= last; nd++) {
    const j = segment(row.nd, nd);
    const lo = row.nd[j]!;
    const hi = row.nd[j + 1]!;
    const a = only(row.slices[nd === hi ? j + 1 : j]!);
    const b = only(row.slices[j + 1]!);
    if (nd === hi) {
      out.push(a);
      continue;
    }
    if (a === undefined || b === undefined || lo === 0 || a.x.length !== b.x.length || a.x.some((x, i) => x !== b.x[i])) {
      out.push(undefined);
      continue;
    }
    const t = (nd - lo) / (hi - lo);
    out.push({ x: a.x, y: a.y.map((y, i) => y + t * (b.y[i]! - y)), above: a.above + t * (b.above - a.above) });
  }
  return out;
}

/** The largest prefill_chunk measured: longer chunks are timed as pieces of it (docs/timing.md). */
export function topChunk(g: AttentionGrid): number {
  return g.pc[g.pc.length - 1]!;
}
