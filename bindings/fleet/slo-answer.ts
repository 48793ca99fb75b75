// The SLO answer in words, as `kvpool fleet`, fleet sweeps and the sweep
// report give it: per router (in a sweep, per router and panel), the fewest
// engines whose p99 TTFT and ITL meet the targets, with the figures that
// decided it. Here, below node/ and cli/, so both say it the same way.

import type { FleetRun } from './fleet-result.js';
import { fewestMeeting, type SloTargets } from './slo-search.js';

/** Milliseconds (and per-second rates) for people: one decimal, thousands separated. */
export function ms(x: number): string {
  return x.toLocaleString('en-US', { minimumFractionDigits: 1, maximumFractionDigits: 1 });
}

/** What one group of runs (a router's, in a sweep also a panel's) answers. */
export interface SloAnswer {
  /** "round-robin", or "round-robin, num-blocks 600" in a sweep with more axes. */
  label: string;
  /** The fewest engines meeting every target; null: no run did. */
  engines: number | null;
  /** The run that met them, or (none did) the one with the most engines. */
  run: FleetRun;
  /** The most engines tried. */
  maxEngines: number;
}

/** The answer of a group of runs (timed, at least one). */
export function sloAnswer(label: string, runs: readonly FleetRun[], slo: SloTargets): SloAnswer {
  const best = fewestMeeting(runs, slo);
  const largest = runs.reduce((a, b) => (b.config.engines > a.config.engines ? b : a));
  return { label, engines: best === null ? null : best.config.engines, run: best ?? largest, maxEngines: largest.config.engines };
}

/** "p99 TTFT <= 500 ms and p99 ITL <= 50 ms". */
export function sloText(slo: SloTargets): string {
  const parts = [...(slo.ttftMs !== undefined ? [`p99 TTFT <= ${slo.ttftMs} ms`] : []), ...(slo.itlMs !== undefined ? [`p99 ITL <= ${slo.itlMs} ms`] : [])];
  return parts.join(' and ');
}

/** "p99 TTFT 431.2 ms, p99 ITL 42.0 ms": the run's figures for the targets given. */
function figuresText(r: FleetRun, slo: SloTargets): string {
  const l = r.latency!;
  return [...(slo.ttftMs !== undefined ? [`p99 TTFT ${ms(l.ttftMs.p99)} ms`] : []), ...(slo.itlMs !== undefined ? [`p99 ITL ${ms(l.itlMs.p99)} ms`] : [])].join(', ');
}

/** The answer as a sentence, prefixed with its label when there are several. */
export function sloAnswerLine(a: SloAnswer, slo: SloTargets, labelled: boolean): string {
  const head = labelled ? `${a.label}: ` : '';
  return a.engines === null
    ? `${head}no fleet up to ${a.maxEngines} engines meets ${sloText(slo)} (${a.maxEngines} engines: ${figuresText(a.run, slo)})`
    : `${head}fewest engines meeting ${sloText(slo)}: ${a.engines} (${figuresText(a.run, slo)})`;
}

/** The `slo` object of JSON output: the targets, and per group the answer with the p99 figures of its run. */
export function sloJson(slo: SloTargets, answers: readonly SloAnswer[]): unknown {
  return {
    ...slo,
    percentile: 99,
    answers: answers.map((a) => ({
      label: a.label,
      router: a.run.config.router,
      engines: a.engines,
      maxEngines: a.maxEngines,
      ttftMsP99: a.run.latency!.ttftMs.p99,
      itlMsP99: a.run.latency!.itlMs.p99,
    })),
  };
}
