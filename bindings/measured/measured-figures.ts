// The figures of a measured run as its harness defines them
// (docs/validation.md, the figures): per request TTFT = first token -
// queued, E2E = last token - queued, TPOT = (last - first) / (tokens - 1)
// for requests of two tokens or more; numpy's percentiles. A run records
// only each request's first and last token, so of ITL (every gap between
// two tokens) it gives the mean exactly -- a request's gaps sum to
// last - first -- and no percentile.

import { latencyFigures } from '../fleet/latency-figures.js';
import type { FleetLatency } from '../fleet/fleet-latency.js';
import type { MeasuredRequest } from './run-format.js';

/** Mean and percentiles of a figure, ms; `null` where the run cannot give one. */
export interface Figure {
  /** Values it covers: requests, or for ITL gaps between tokens. */
  count: number;
  mean: number;
  p50: number | null;
  p90: number | null;
  p95: number | null;
  p99: number | null;
}

/** TTFT, TPOT, ITL and end-to-end latency of a run, ms. */
export interface Figures {
  ttftMs: Figure;
  tpotMs: Figure;
  itlMs: Figure;
  e2eMs: Figure;
}

export const FIGURE_KEYS = ['ttftMs', 'tpotMs', 'itlMs', 'e2eMs'] as const;
export type FigureKey = (typeof FIGURE_KEYS)[number];
export const STAT_KEYS = ['mean', 'p50', 'p90', 'p95', 'p99'] as const;
export type StatKey = (typeof STAT_KEYS)[number];

function figure(values: Float64Array, n: number): Figure {
  const f = latencyFigures(values, n);
  return { count: f.count, mean: f.mean, p50: f.p50, p90: f.p90, p95: f.p95, p99: f.p99 };
}

/** The measured figures of a run's requests. */
export function measuredFigures(requests: readonly MeasuredRequest[]): Figures {
  const n = requests.length;
  const ttft = new Float64Array(n);
  const e2e = new Float64Array(n);
  const tpot = new Float64Array(n);
  let np = 0;
  let decodeMs = 0;
  let gaps = 0;
  for (let i = 0; i < n; i++) {
    const r = requests[i]!;
    ttft[i] = (r.firstTokenTs - r.queuedTs) * 1000;
    e2e[i] = (r.lastTokenTs - r.queuedTs) * 1000;
    if (r.outputTokens < 2) continue;
    const d = (r.lastTokenTs - r.firstTokenTs) * 1000;
    tpot[np++] = d / (r.outputTokens - 1);
    decodeMs += d;
    gaps += r.outputTokens - 1;
  }
  return {
    ttftMs: figure(ttft, n),
    tpotMs: figure(tpot, np),
    itlMs: { count: gaps, mean: gaps === 0 ? 0 : Math.round((decodeMs / gaps) * 1e3) / 1e3, p50: null, p90: null, p95: null, p99: null },
    e2eMs: figure(e2e, n),
  };
}

/** The figures of a timed fleet's run, in the same shape. */
export function predictedFigures(l: FleetLatency): Figures {
  const pick = (f: FleetLatency['ttftMs']): Figure => ({ count: f.count, mean: f.mean, p50: f.p50, p90: f.p90, p95: f.p95, p99: f.p99 });
  return { ttftMs: pick(l.ttftMs), tpotMs: pick(l.tpotMs), itlMs: pick(l.itlMs), e2eMs: pick(l.e2eMs) };
}

/** (predicted - measured) / measured, %, to 0.01; null where either is missing or measured is 0. */
export function differencePct(measured: Figures, predicted: Figures): Record<FigureKey, Record<StatKey, number | null>> {
  const out = {} as Record<FigureKey, Record<StatKey, number | null>>;
  for (const k of FIGURE_KEYS) {
    out[k] = {} as Record<StatKey, number | null>;
    for (const s of STAT_KEYS) {
      const m = measured[k][s];
      const p = predicted[k][s];
      out[k][s] = m === null || p === null || m === 0 ? null : Math.round(((p - m) / m) * 1e4) / 100;
    }
  }
  return out;
}
