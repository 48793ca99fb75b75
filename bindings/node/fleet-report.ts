// The report of a fleet sweep (`kvpool sweep --router ... --engines ...`):
// a chart per fleet figure -- hit rate, queueing (mean and p99), load
// imbalance, rejected requests -- with a bar per router, grouped by fleet
// size, one panel per value of the other varied options.

import { writeFileSync } from 'node:fs';
import type { FleetRun } from '../fleet/fleet-result.js';
import { fixedOptions, groupWarnings, renderSvg, stackedSvg, type ReportChart, type VegaLiteSpec } from './report.js';
import { esc, reportPage } from './report-page.js';
import { FLEET_GRID_KEYS, FLEET_NAME_KEYS, type FleetGridKey } from './fleet-sweep.js';
import { checkSloTargets, type SloTargets } from '../fleet/slo-search.js';
import { ms, sloText, sweepSloAnswers, sweepSloLine } from '../fleet/slo-answer.js';
import { SWEEP_GRID_KEYS, type SweepGridKey } from './sweep.js';
import { checkReportArgs } from './report-args.js';
import { describe } from '../validate.js';

export type FleetVaried = ReadonlyArray<SweepGridKey | FleetGridKey>;

const FLEET_VARIED_KEYS: readonly string[] = [...SWEEP_GRID_KEYS, ...FLEET_GRID_KEYS];

const flag = (k: string) => k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
const isFleetKey = (k: string) => (FLEET_NAME_KEYS as readonly string[]).includes(k);

/** "num-blocks 4096, eviction lfu": a run's values of the varied replay options (the panel it is drawn in). */
function panelLabel(r: FleetRun, varied: FleetVaried): string {
  const parts = varied.filter((k) => !isFleetKey(k)).map((k) => `${flag(k)} ${String(r.config[k])}`);
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
  const others = varied.filter((k) => !isFleetKey(k) && k !== 'numBlocks').map((k) => `${flag(k)} ${String(r.config[k])}`);
  return [r.config.router, ...others].join(', ');
}

/** The charts of a fleet sweep, as Vega-Lite specs with the data inline; timed fleets add latency charts, with the SLO's line where one is given. */
export function fleetReportCharts(runs: readonly FleetRun[], varied: FleetVaried, slo?: SloTargets): ReportChart[] {
  const rows = runs.map((r) => ({
    engines: r.config.engines,
    router: r.config.router,
    panel: panelLabel(r, varied),
    hitRate: r.hitRate,
    queueMean: r.queueing.meanSteps,
    queueP99: r.queueing.p99Steps,
    loadImbalance: r.loadImbalance,
    rejected: r.rejected,
    // null on the step clock: no bar (a sweep may mix the clocks, e.g. --scheduler xllm,continuous).
    ttftP99: r.latency?.ttftMs.p99 ?? null,
    itlP99: r.latency?.itlMs.p99 ?? null,
    e2eP99: r.latency?.e2eMs.p99 ?? null,
    outputTokensPerSecond: r.latency?.outputTokensPerSecond ?? null,
  }));
  const panelOrder = [...new Set(rows.map((r) => r.panel))];
  const panels = panelOrder.length > 1;
  const routers = [...new Set(rows.map((r) => r.router))];
  const sizes = new Set(rows.map((r) => r.engines)).size;
  const width = Math.min(560, Math.max(160, 34 * routers.length * sizes + 30));
  const barLayer = (field: string, title: string, yAxis: object) => ({
    mark: 'bar',
    encoding: {
      x: { field: 'engines', type: 'ordinal', title: 'engines', axis: { labelAngle: 0 } },
      xOffset: { field: 'router', type: 'nominal', sort: routers },
      y: { field, type: 'quantitative', title, ...yAxis },
      color: { field: 'router', type: 'nominal', title: 'router', sort: routers },
    },
  });
  const column = { field: 'panel', type: 'nominal', title: null, sort: panelOrder, header: { labelLimit: 400 } };
  const bars = (field: string, title: string, yAxis: object, line?: number): VegaLiteSpec => {
    const head = { $schema: 'https://vega.github.io/schema/vega-lite/v6.json', data: { values: rows } };
    const bar = barLayer(field, title, yAxis);
    if (line === undefined) return { ...head, width, height: 240, ...bar, encoding: { ...bar.encoding, ...(panels && { column }) } };
    // The target as a dashed rule across the bars; a layered chart is faceted with facet/spec (a layer takes no column channel).
    // Aggregated to one row (per panel) so that the rule is drawn once, not once per fleet.
    const rule = { transform: [{ aggregate: [{ op: 'count', as: 'fleets' }] }], mark: { type: 'rule', color: '#c0392b', strokeDash: [6, 4], size: 2 }, encoding: { y: { datum: line } } };
    const layered = { width, height: 240, layer: [bar, rule] };
    return panels ? { ...head, facet: { column }, spec: layered } : { ...head, ...layered };
  };
  const rejected = runs.some((r) => r.rejected > 0);
  const timed = runs.some((r) => r.latency !== undefined);
  const target = (t: number | undefined) => (t === undefined ? '' : ` The dashed line is the target, ${t} ms.`);
  const latencyCharts: ReportChart[] = !timed
    ? []
    : [
        {
          id: 'ttft-p99',
          title: 'Time to first token, 99th percentile',
          explain: `Milliseconds from a request's arrival to its first token that 99 % of the requests do not exceed.${target(slo?.ttftMs)}`,
          spec: bars('ttftP99', 'p99 TTFT (ms)', { format: ',.1f' }, slo?.ttftMs),
        },
        {
          id: 'itl-p99',
          title: 'Inter-token latency, 99th percentile',
          explain: `Per request with two tokens or more, the mean milliseconds between its tokens after the first; the value 99 % of those requests do not exceed.${target(slo?.itlMs)}`,
          spec: bars('itlP99', 'p99 ITL (ms)', { format: ',.1f' }, slo?.itlMs),
        },
        {
          id: 'e2e-p99',
          title: 'End-to-end latency, 99th percentile',
          explain: 'Milliseconds from arrival to the last token that 99 % of the requests do not exceed.',
          spec: bars('e2eP99', 'p99 end-to-end (ms)', { format: ',.1f' }),
        },
        {
          id: 'output-throughput',
          title: 'Output throughput',
          explain: 'Output tokens per second of the run, over the whole fleet.',
          spec: bars('outputTokensPerSecond', 'output tokens/s', { format: ',.1f' }),
        },
      ];
  return [
    ...latencyCharts,
    {
      id: 'fleet-hit-rate',
      title: 'Fleet hit rate by router and fleet size',
      explain: 'Prompt blocks found in the prefix cache of the engine the router chose, as a share of all full prompt blocks, over the whole fleet.',
      spec: bars('hitRate', 'fleet hit rate', { axis: { format: '.0%' }, format: '.4%' }),
    },
    {
      id: 'queueing-mean',
      title: 'Mean queueing delay',
      explain: 'Steps from a request\'s arrival to its admission by its engine, averaged over every request (rejected ones included).',
      spec: bars('queueMean', 'queueing mean (steps)', { format: ',.2f' }),
    },
    {
      id: 'queueing-p99',
      title: 'Queueing delay, 99th percentile',
      explain: 'The delay 99 % of the requests do not exceed, in steps.',
      spec: bars('queueP99', 'queueing p99 (steps)', { format: ',d' }),
    },
    {
      id: 'load-imbalance',
      title: 'Load imbalance',
      explain: 'K times the busiest engine\'s load over the fleet\'s total load, summed over the steps: 1 when every engine carries the same load, K when one carries all.',
      spec: bars('loadImbalance', 'load imbalance', { format: '.3f' }),
    },
    rejected
      ? { id: 'rejected', title: 'Rejected requests', explain: 'Requests whose prompt needs more blocks than a rank of an engine has.', spec: bars('rejected', 'rejected requests', { format: ',d' }) }
      : { id: 'rejected', title: 'Rejected requests', explain: '', spec: null, missing: 'No configuration of this sweep rejected a request.' },
  ];
}

/** The HTML page: fixed options, the charts, a row per fleet. */
export async function fleetReportHtml(runs: readonly FleetRun[], varied: FleetVaried, slo?: SloTargets): Promise<string> {
  checkReportArgs(runs, varied, FLEET_VARIED_KEYS);
  checkReportSlo(runs, slo);
  const charts = fleetReportCharts(runs, varied, slo);
  const timed = runs.some((r) => r.latency !== undefined);
  const lat = (r: FleetRun, key: string, v: number | undefined) => cell(key, v === undefined ? '-' : ms(v), v ?? '');
  const svgs = await Promise.all(charts.map((c) => (c.spec ? renderSvg(c.spec) : Promise.resolve(''))));
  const first = runs[0]!.config;
  const n = (x: number) => x.toLocaleString('en-US');
  const cell = (key: string, text: string, value: number | string) => ({ key, text, value: String(value) });
  return reportPage({
    title: `kvpool sweep: ${first.trace}, fleets`,
    heading: `kvpool sweep: ${first.trace}, ${runs.length} fleets`,
    fixed: fixedOptions(first, varied),
    warnings: groupWarnings(runs).map(({ message, configs }) => `${message} (${configs.map((i) => fleetLabel(runs[i]!, varied)).join('; ')})`),
    charts,
    svgs,
    ...(slo !== undefined && { answers: { title: `Smallest fleet meeting ${sloText(slo)}`, lines: sweepSloAnswers(runs, slo, (r) => sloGroupLabel(r, varied)).map((a) => sweepSloLine(a, slo)) } }),
    head: [...varied.map(flag), 'fleet hit rate', 'matched blocks', 'prompt blocks', 'queueing mean', 'queueing p99', 'load imbalance', 'rejected', 'truncated', 'steps', ...(timed ? ['p99 TTFT ms', 'p99 ITL ms', 'p99 E2E ms', 'output tok/s'] : [])],
    rows: runs.map((r) => [
      ...varied.map((k) => cell(k, String(r.config[k]), String(r.config[k]))),
      cell('hitRate', `${(r.hitRate * 100).toFixed(4)} %`, r.hitRate),
      cell('matchedBlocks', n(r.matchedBlocks), r.matchedBlocks),
      cell('promptBlocks', n(r.promptBlocks), r.promptBlocks),
      cell('queueMean', r.queueing.meanSteps.toFixed(2), r.queueing.meanSteps),
      cell('queueP99', n(r.queueing.p99Steps), r.queueing.p99Steps),
      cell('loadImbalance', r.loadImbalance.toFixed(3), r.loadImbalance),
      cell('rejected', n(r.rejected), r.rejected),
      cell('truncated', n(r.truncated), r.truncated),
      cell('steps', n(r.steps), r.steps),
      ...(timed ? [lat(r, 'ttftP99', r.latency?.ttftMs.p99), lat(r, 'itlP99', r.latency?.itlMs.p99), lat(r, 'e2eP99', r.latency?.e2eMs.p99), lat(r, 'outputTokensPerSecond', r.latency?.outputTokensPerSecond)] : []),
    ]),
    note: `Fleet hit rate = matched blocks / prompt blocks over every engine; queueing in steps of ${esc(String(first.stepMs))} ms. Every figure is explained by <code>kvpool fleet --help</code> and in kvpool's docs/fleet.md; the same results as data: <code>kvpool sweep --router ... --format csv</code> or <code>--format json</code>.`,
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

/** Writes the report: `.svg` the charts alone, anything else (`.html`) the page. */
export async function writeFleetReport(file: string, runs: readonly FleetRun[], varied: FleetVaried, slo?: SloTargets): Promise<void> {
  if (typeof file !== 'string') throw new TypeError(`file must be a path, got ${describe(file)}`);
  const text = /\.svg$/i.test(file) ? await fleetReportSvg(runs, varied, slo) : await fleetReportHtml(runs, varied, slo);
  writeFileSync(file, text);
}
