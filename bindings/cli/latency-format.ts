// The millisecond part of a timed fleet's output (docs/fleet.md, time): a
// block of latency figures under the fleet's, utilisation columns in the
// engine table, p99 columns in a comparison, the scalar CSV columns. A run
// on the step clock has no `latency` and gets none of it, so its output is
// what it always was.

import type { FleetConfig } from '../fleet/fleet-options.js';
import type { FleetLatency } from '../fleet/fleet-latency.js';
import type { FleetRun } from '../fleet/fleet-result.js';
import { ms } from '../fleet/slo-answer.js';
import { get, percent } from './format.js';
import { FLEET_LATENCY_ENGINE_GLOSSARY, FLEET_LATENCY_GLOSSARY, FLEET_TIMED_CONFIG_GLOSSARY, LATENCY_FIGURE_FIELDS, LATENCY_FIGURES } from './fleet-glossary.js';

const isFigure = (key: string) => (LATENCY_FIGURES as readonly string[]).includes(key.slice('latency.'.length));

/** "timing polynomial · scheduler xllm · speedup 1 · concurrency 0": a timed run's own configuration ('' on the step clock). */
export function timedConfigParts(c: FleetConfig): string {
  // A vLLM fleet's budget is among its engine's options (engineConfigParts), on either clock.
  return FLEET_TIMED_CONFIG_GLOSSARY.filter((e) => get(c, e.key.slice('config.'.length)) !== undefined && !(c.engine !== undefined && e.key === 'config.maxNumBatchedTokens'))
    .map((e) => `${e.label} ${String(get(c, e.key.slice('config.'.length)))}`)
    .join(' · ');
}

/** The latency block of one run's table: a row per figure (mean, p50, p90, p95, p99, max in ms, and what it is over), then the run's totals. */
export function latencyLines(l: FleetLatency): string[] {
  const figures = FLEET_LATENCY_GLOSSARY.filter((e) => isFigure(e.key));
  const head = ['latency (ms)', 'mean', 'p50', 'p90', 'p95', 'p99', 'max', 'over'];
  const body = figures.map((e) => {
    const f = get(l, e.key.slice('latency.'.length)) as FleetLatency['ttftMs'];
    // ITL is over the gaps between tokens; the others over requests.
    const over = `${f.count.toLocaleString('en-US')} ${e.key === 'latency.itlMs' ? 'gaps' : 'requests'}`;
    return [e.label, ms(f.mean), ms(f.p50), ms(f.p90), ms(f.p95), ms(f.p99), ms(f.max), over];
  });
  const cw = head.map((h, c) => Math.max(h.length, ...body.map((b) => b[c]!.length)));
  const line = (cells: readonly string[]) => '  ' + cells.map((x, c) => (c === 0 ? x.padEnd(cw[c]!) : x.padStart(cw[c]!))).join('  ');
  const totals = FLEET_LATENCY_GLOSSARY.filter((e) => !isFigure(e.key)).map((e) => {
    const v = get(l, e.key.slice('latency.'.length)) as number;
    return [e.label, /Ms$|PerSecond$/.test(e.key) ? ms(v) : v.toLocaleString('en-US')] as const;
  });
  const w = Math.max(...totals.map(([k]) => k.length));
  const vw = Math.max(...totals.map(([, v]) => v.length));
  return [line(head), ...body.map(line), '', ...totals.map(([k, v]) => `  ${k.padEnd(w)}  ${v.padStart(vw)}`)];
}

/** The engine table's extra columns of a timed run: their heads, and each engine's cells. */
export function latencyEngineColumns(l: FleetLatency): { head: string[]; cells: (engine: number) => string[] } {
  return {
    head: FLEET_LATENCY_ENGINE_GLOSSARY.map((e) => e.label),
    cells: (engine) =>
      FLEET_LATENCY_ENGINE_GLOSSARY.map((e) => {
        const v = get(l.engines[engine], e.key.slice('latency.engines[].'.length)) as number;
        return e.key.endsWith('utilisation') ? percent(v) : e.key.endsWith('Ms') ? ms(v) : v.toLocaleString('en-US');
      }),
  };
}

/** A comparison's latency columns (when any run is timed): p99 TTFT, TPOT and ITL, output tokens per second. */
export const COMPARISON_LATENCY_HEAD = ['TTFT p99 ms', 'TPOT p99 ms', 'ITL p99 ms', 'output tok/s'];

export function comparisonLatencyCells(r: FleetRun): string[] {
  const l = r.latency;
  return l === undefined ? ['-', '-', '-', '-'] : [ms(l.ttftMs.p99), ms(l.tpotMs.p99), ms(l.itlMs.p99), ms(l.outputTokensPerSecond)];
}

/** CSV columns of timed runs: config's timed keys, then every latency scalar (each figure one column per field); none on the step clock. */
export function latencyCsvColumns(runs: readonly FleetRun[]): string[] {
  if (!runs.some((r) => r.latency !== undefined)) return [];
  const scalars = FLEET_LATENCY_GLOSSARY.flatMap((e) => (isFigure(e.key) ? LATENCY_FIGURE_FIELDS.map((f) => `${e.key}.${f}`) : [e.key]));
  return [...FLEET_TIMED_CONFIG_GLOSSARY.map((e) => e.key), ...scalars];
}

/** The run as JSON keeps it: `latency.requests` (a value per request) only when asked for. */
export function latencyJson(l: FleetLatency | undefined, perRequest: boolean): { latency?: unknown } {
  if (l === undefined) return {};
  if (perRequest) return { latency: l };
  const { requests: _requests, ...rest } = l;
  return { latency: rest };
}
