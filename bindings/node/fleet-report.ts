// The report of a fleet sweep (`kvpool sweep --router ... --engines ...`):
// a chart per fleet figure -- hit rate, queueing (mean and p99), load
// imbalance, rejected requests -- with a bar per router, grouped by fleet
// size, one panel per value of the other varied options.

import { writeFileSync } from 'node:fs';
import type { FleetRun } from '../fleet/fleet-result.js';
import { fixedOptions, groupWarnings, renderSvg, stackedSvg, type ReportChart, type VegaLiteSpec } from './report.js';
import { esc, reportPage } from './report-page.js';
import { barChart, barLayout, type BarAxis } from './bar-chart.js';
import { configValue, FLEET_GRID_KEYS, FLEET_NAME_KEYS, type FleetGridKey } from './fleet-sweep.js';
import { checkSloTargets, type SloTargets } from '../fleet/slo-search.js';
import { ms, sloText, sweepSloAnswers, sweepSloLine, type SweepSloAnswer } from '../fleet/slo-answer.js';
import { SWEEP_GRID_KEYS, type SweepGridKey } from './sweep.js';
import { checkReportArgs } from './report-args.js';
import { describe } from '../validate.js';
import { fixed } from '../number-text.js';

export type FleetVaried = ReadonlyArray<SweepGridKey | FleetGridKey>;

const FLEET_VARIED_KEYS: readonly string[] = [...SWEEP_GRID_KEYS, ...FLEET_GRID_KEYS];

const flag = (k: string) => k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
const isFleetKey = (k: string) => (FLEET_NAME_KEYS as readonly string[]).includes(k);

/** "num-blocks 4096, eviction lfu": a run's values of the varied replay options (the panel it is drawn in). */
function panelLabel(r: FleetRun, varied: FleetVaried): string {
  const parts = varied.filter((k) => !isFleetKey(k)).map((k) => `${flag(k)} ${String(configValue(r.config, k))}`);
  return parts.length > 0 ? parts.join(', ') : 'all';
}

/** "round-robin x 4, num-blocks 4096": a fleet's name in the warnings. */
function fleetLabel(r: FleetRun, varied: FleetVaried): string {
  return `${r.config.router} x ${r.config.engines}${varied.some((k) => !isFleetKey(k)) ? `, ${panelLabel(r, varied)}` : ''}`;
}

/**
 * "round-robin" or "round-robin, speedup 2": the group a sweep's SLO answer
 * is given for -- a router, per value of the varied axes other than the two
 * the answer chooses between (engines, blocks per rank).
 */
export function sloGroupLabel(r: FleetRun, varied: FleetVaried): string {
  const others = varied.filter((k) => !isFleetKey(k) && k !== 'numBlocks').map((k) => `${flag(k)} ${String(configValue(r.config, k))}`);
  return [r.config.router, ...others].join(', ');
}

/**
 * The latency figures a report charts, as p99 bars: each a figure of
 * `latency` ({ p99, ... } in ms) and the SLO target that holds it. A figure
 * no run has is left out (so a figure added to the results is one line here).
 */
const LATENCY_CHARTS = [
  { id: 'ttft-p99', figure: 'ttftMs', short: 'TTFT', title: 'Time to first token, 99th percentile', axis: 'p99 TTFT (ms)', explain: "Milliseconds from a request's arrival to its first token that 99 % of the requests do not exceed." },
  { id: 'tpot-p99', figure: 'tpotMs', short: 'TPOT', title: 'Time per output token, 99th percentile', axis: 'p99 TPOT (ms)', explain: "The 99th percentile of each request's time per output token after the first, (last token - first token) / (tokens - 1), in milliseconds (docs/fleet-time.md, the figures)." },
  { id: 'itl-p99', figure: 'itlMs', short: 'ITL', title: 'Inter-token latency, 99th percentile', axis: 'p99 ITL (ms)', explain: 'The 99th percentile over every gap between two consecutive tokens of a request, in milliseconds: it catches the stalls a long prefill causes (docs/fleet-time.md, the figures).' },
  { id: 'e2e-p99', figure: 'e2eMs', short: 'E2E', title: 'End-to-end latency, 99th percentile', axis: 'p99 end-to-end (ms)', explain: 'Milliseconds from arrival to the last token that 99 % of the requests do not exceed.' },
] as const;

/** The p99 of a latency figure of the run (null: on the step clock, or a figure the run does not have). */
export function latencyP99(r: FleetRun, figure: string): number | null {
  const f = (r.latency as unknown as Record<string, { p99?: unknown } | undefined> | undefined)?.[figure];
  return typeof f?.p99 === 'number' ? f.p99 : null;
}

/** The latency figures some run of `runs` has, in chart order. */
export function latencyFigures(runs: readonly FleetRun[]): Array<(typeof LATENCY_CHARTS)[number]> {
  return LATENCY_CHARTS.filter((c) => runs.some((r) => latencyP99(r, c.figure) !== null));
}

/** The target of `figure` in `slo` (ttftMs, itlMs, ...), if one is given. */
function targetOf(slo: SloTargets | undefined, figure: string): number | undefined {
  const t = (slo as Record<string, unknown> | undefined)?.[figure];
  return typeof t === 'number' ? t : undefined;
}

/** The charts of a fleet sweep, as Vega-Lite specs with the data inline; timed fleets add latency charts, with the SLO's line where one is given. */
export function fleetReportCharts(runs: readonly FleetRun[], varied: FleetVaried, slo?: SloTargets): ReportChart[] {
  const figures = latencyFigures(runs);
  const layout = barLayout(
    runs.map((r) => ({
      engines: r.config.engines,
      router: r.config.router,
      panel: panelLabel(r, varied),
      hitRate: r.hitRate,
      queueMean: r.queueing.meanSteps,
      queueP99: r.queueing.p99Steps,
      loadImbalance: r.loadImbalance,
      rejected: r.rejected,
      // null on the step clock: no bar (a sweep may mix the clocks, e.g. --scheduler xllm,continuous).
      ...Object.fromEntries(figures.map((c) => [`${c.figure.replace(/Ms$/, '')}P99`, latencyP99(r, c.figure)])),
      outputTokensPerSecond: r.latency?.outputTokensPerSecond ?? null,
    })),
  );
  const chart = (id: string, title: string, explain: string, field: string, axisTitle: string, axis: BarAxis, target?: number): ReportChart => {
    const { spec, clippedAt } = barChart(layout, field, axisTitle, axis, target);
    const line = target === undefined ? '' : ` The dashed line is the target, ${target.toLocaleString('en-US')} ms.`;
    const cut = clippedAt === undefined ? '' : ` The axis ends at ${clippedAt.toLocaleString('en-US')}: a bar cut there has its value written on it.`;
    return { id, title, explain: `${explain}${line}${cut}`, spec };
  };
  const rejected = runs.some((r) => r.rejected > 0);
  const timed = runs.some((r) => r.latency !== undefined);
  const steps = timed ? 'engine steps' : 'steps';
  return [
    ...figures.map((c) => chart(c.id, c.title, c.explain, `${c.figure.replace(/Ms$/, '')}P99`, c.axis, { format: ',.1f' }, targetOf(slo, c.figure))),
    ...(timed ? [chart('output-throughput', 'Output throughput', 'Output tokens per second of the run, over the whole fleet.', 'outputTokensPerSecond', 'output tokens/s', { format: ',.1f' })] : []),
    chart('fleet-hit-rate', 'Fleet hit rate by router and fleet size', 'Prompt blocks found in the prefix cache of the engine the router chose, as a share of all full prompt blocks, over the whole fleet.', 'hitRate', 'fleet hit rate', { format: '.4%', axisFormat: '.0%', cut: false }),
    chart('queueing-mean', 'Mean queueing delay', `${timed ? 'Engine steps begun' : 'Steps'} from a request's arrival to its admission by its engine, averaged over every request (rejected ones included).`, 'queueMean', `queueing mean (${steps})`, { format: ',.2f' }),
    chart('queueing-p99', 'Queueing delay, 99th percentile', `The delay 99 % of the requests do not exceed, in ${steps}.`, 'queueP99', `queueing p99 (${steps})`, { format: ',d' }),
    chart('load-imbalance', 'Load imbalance', "K times the busiest engine's load over the fleet's total load, summed over the steps: 1 when every engine carries the same load, K when one carries all.", 'loadImbalance', 'load imbalance', { format: '.3f', cut: false }),
    rejected
      ? chart('rejected', 'Rejected requests', 'Requests whose prompt needs more blocks than a rank of an engine has.', 'rejected', 'rejected requests', { format: ',d' })
      : { id: 'rejected', title: 'Rejected requests', explain: '', spec: null, missing: 'No configuration of this sweep rejected a request.' },
  ];
}

/**
 * The HTML page: fixed options, the charts, a row per fleet. With `slo`,
 * the answers above the charts: `answers` as given (kvpool sweep's, with
 * the reason no fleet can meet a target where it knows one, slo-floor.ts),
 * else worked out from the runs (without reasons: the report has neither
 * the trace nor the timing model).
 */
export async function fleetReportHtml(runs: readonly FleetRun[], varied: FleetVaried, slo?: SloTargets, answers?: readonly SweepSloAnswer[]): Promise<string> {
  checkReportArgs(runs, varied, FLEET_VARIED_KEYS);
  checkReportSlo(runs, slo);
  const charts = fleetReportCharts(runs, varied, slo);
  const timed = runs.some((r) => r.latency !== undefined);
  const figures = latencyFigures(runs);
  const lat = (key: string, v: number | null) => cell(key, v === null ? '-' : ms(v), v ?? '');
  // Queueing counts steps: of stepMs on the step clock, of whatever the model says on the millisecond clock.
  const stepRun = runs.find((r) => r.latency === undefined);
  const stepUnit = timed ? 'engine steps' : 'steps';
  const queueing = !timed
    ? `queueing in steps of ${esc(String(stepRun!.config.stepMs))} ms`
    : stepRun === undefined
      ? 'queueing in engine steps (a timed step lasts what the timing model says of its batch)'
      : `queueing in engine steps (${esc(String(stepRun.config.stepMs))} ms each on the step clock; what the timing model says on the millisecond clock); latency in ms`;
  const svgs = await Promise.all(charts.map((c) => (c.spec ? renderSvg(c.spec) : Promise.resolve(''))));
  const first = runs[0]!.config;
  const n = (x: number) => x.toLocaleString('en-US');
  const cell = (key: string, text: string, value: number | string) => ({ key, text, value: String(value) });
  return reportPage({
    title: `kvpool sweep: ${first.trace}, fleets`,
    heading: `kvpool sweep: ${first.trace}, ${runs.length} fleets`,
    fixed: fixedOptions(runs.map((r) => r.config), varied),
    warnings: groupWarnings(runs).map(({ message, configs }) => `${message} (${configs.map((i) => fleetLabel(runs[i]!, varied)).join('; ')})`),
    charts,
    svgs,
    ...(slo !== undefined && { answers: { title: `Smallest fleet meeting ${sloText(slo)}`, lines: (answers ?? sweepSloAnswers(runs, slo, (r) => sloGroupLabel(r, varied))).map((a) => sweepSloLine(a, slo)) } }),
    head: [...varied.map(flag), 'fleet hit rate', 'matched blocks', 'prompt blocks', `queueing mean (${stepUnit})`, `queueing p99 (${stepUnit})`, 'load imbalance', 'rejected', 'truncated', 'steps', ...figures.map((c) => c.axis), ...(timed ? ['output tokens/s'] : [])],
    rows: runs.map((r) => [
      ...varied.map((k) => cell(k, String(configValue(r.config, k)), String(configValue(r.config, k)))),
      cell('hitRate', `${(r.hitRate * 100).toFixed(4)} %`, r.hitRate),
      cell('matchedBlocks', n(r.matchedBlocks), r.matchedBlocks),
      cell('promptBlocks', n(r.promptBlocks), r.promptBlocks),
      cell('queueMean', fixed(r.queueing.meanSteps, 2), r.queueing.meanSteps),
      cell('queueP99', n(r.queueing.p99Steps), r.queueing.p99Steps),
      cell('loadImbalance', r.loadImbalance.toFixed(3), r.loadImbalance),
      cell('rejected', n(r.rejected), r.rejected),
      cell('truncated', n(r.truncated), r.truncated),
      cell('steps', n(r.steps), r.steps),
      ...figures.map((c) => lat(`${c.figure.replace(/Ms$/, '')}P99`, latencyP99(r, c.figure))),
      ...(timed ? [lat('outputTokensPerSecond', r.latency?.outputTokensPerSecond ?? null)] : []),
    ]),
    note: `Fleet hit rate = matched blocks / prompt blocks over every engine; ${queueing}. Every figure is explained by <code>kvpool fleet --help</code> and in kvpool's docs/fleet.md; the same results as data: <code>kvpool sweep --router ... --format csv</code> or <code>--format json</code>.`,
  });
}

/** The charts alone, stacked in one SVG. */
async function fleetReportSvg(runs: readonly FleetRun[], varied: FleetVaried, slo?: SloTargets): Promise<string> {
  checkReportArgs(runs, varied, FLEET_VARIED_KEYS);
  checkReportSlo(runs, slo);
  return stackedSvg(fleetReportCharts(runs, varied, slo));
}

/** SLO targets are checked, and need every fleet timed. */
function checkReportSlo(runs: readonly FleetRun[], slo: SloTargets | undefined): void {
  if (slo === undefined) return;
  checkSloTargets(slo);
  if (runs.some((r) => r.latency === undefined)) throw new RangeError('slo: every fleet of the report must be timed (a step-clock fleet has no latency to hold to it)');
}

/** Writes the report: `.svg` the charts alone, anything else (`.html`) the page (`answers`: as fleetReportHtml's). */
export async function writeFleetReport(file: string, runs: readonly FleetRun[], varied: FleetVaried, slo?: SloTargets, answers?: readonly SweepSloAnswer[]): Promise<void> {
  if (typeof file !== 'string') throw new TypeError(`file must be a path, got ${describe(file)}`);
  const text = /\.svg$/i.test(file) ? await fleetReportSvg(runs, varied, slo) : await fleetReportHtml(runs, varied, slo, answers);
  writeFileSync(file, text);
}
