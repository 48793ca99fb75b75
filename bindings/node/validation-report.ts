// The report of `kvpool validate --report FILE.html` (docs/validation.md,
// the report): each request's TTFT over its arrival, and per second the
// requests running and waiting and the prompt and generated tokens,
// predicted over measured; then the comparison table. The same page as the
// sweep reports (report-page.ts): charts drawn as SVG in Node, no script.

import { writeFileSync } from 'node:fs';
import type { Validation } from '../measured/validate-run.js';
import { FIGURE_KEYS, STAT_KEYS } from '../measured/measured-figures.js';
import { describe } from '../validate.js';
import { renderSvg } from './report.js';
import { esc, reportPage, type ReportChart, type ReportCell, type VegaLiteSpec } from './report-page.js';
import { fixed } from '../number-text.js';

const SCHEMA = 'https://vega.github.io/schema/vega-lite/v6.json';
const SOURCE = { field: 'source', type: 'nominal' as const, title: null, scale: { domain: ['measured', 'kvpool'], range: ['#4c78a8', '#e45756'] } };

/** The report's charts, Vega-Lite specs with their data inline. */
export function validationCharts(v: Validation): ReportChart[] {
  const points = v.perRequest.arrivalS.flatMap((a, i) => [
    { arrivalS: round(a, 3), ttftS: round(v.perRequest.measuredTtftMs[i]! / 1000, 4), source: 'measured' },
    ...(v.perRequest.predictedTtftMs[i] === null ? [] : [{ arrivalS: round(a, 3), ttftS: round(v.perRequest.predictedTtftMs[i]! / 1000, 4), source: 'kvpool' }]),
  ]);
  const series = [
    ...v.series.measured.map((p) => ({ t: p.t, running: p.running, waiting: p.waiting, prompt: p.promptThroughput, gen: p.genThroughput, source: 'measured' })),
    ...v.series.predicted.map((p) => ({ t: p.t, running: p.running, waiting: p.waiting, prompt: p.promptThroughput, gen: p.genThroughput, source: 'kvpool' })),
  ];
  const line = (field: string, title: string): VegaLiteSpec => ({
    $schema: SCHEMA,
    width: 640,
    height: 220,
    data: { values: series },
    mark: { type: 'line', interpolate: 'step-before' },
    encoding: {
      x: { field: 't', type: 'quantitative', title: 'seconds' },
      y: { field, type: 'quantitative', title },
      color: SOURCE,
    },
  });
  return [
    {
      id: 'ttft',
      title: 'Time to first token of each request, by arrival',
      explain: "Each dot a request: when it arrived (seconds after the first) and its time to first token, as measured (first token - queued) and as kvpool predicts it (first token - arrival).",
      spec: {
        $schema: SCHEMA,
        width: 640,
        height: 300,
        data: { values: points },
        mark: { type: 'point', filled: true, size: 16, opacity: 0.7 },
        encoding: {
          x: { field: 'arrivalS', type: 'quantitative', title: 'arrival (s after the first)' },
          y: { field: 'ttftS', type: 'quantitative', title: 'TTFT (s)' },
          color: SOURCE,
        },
      },
    },
    { id: 'running', title: 'Requests running', explain: "Requests the engine held at the end of each second (vLLM's running gauge; kvpool: admitted and not finished).", spec: line('running', 'running') },
    { id: 'waiting', title: 'Requests waiting', explain: 'Requests that had arrived but not been scheduled, at the end of each second.', spec: line('waiting', 'waiting') },
    { id: 'prompt-throughput', title: 'Prompt tokens per second', explain: 'Prompt tokens of the requests whose first token came in each second (as vLLM counts them).', spec: line('prompt', 'prompt tokens/s') },
    { id: 'gen-throughput', title: 'Generated tokens per second', explain: 'Output tokens given in each second.', spec: line('gen', 'generated tokens/s') },
  ];
}

function round(x: number, d: number): number {
  return Math.round(x * 10 ** d) / 10 ** d;
}

/** The HTML page. */
export async function validationReportHtml(v: Validation): Promise<string> {
  const charts = validationCharts(v);
  const svgs = await Promise.all(charts.map((c) => (c.spec ? renderSvg(c.spec) : Promise.resolve(''))));
  const s = v.settings;
  const cell = (key: string, text: string, value: number | string | null): ReportCell => ({ key, text, value: value === null ? '' : String(value) });
  const f = (x: number | null) => (x === null ? '-' : fixed(x, 1));
  const peer = v.peer;
  const rows = FIGURE_KEYS.flatMap((k) =>
    STAT_KEYS.map((st) => {
      const pk = k === 'itlMs' ? undefined : k;
      const pv = peer && pk ? peer.predicted[pk][st] : null;
      return [
        cell('figure', k.replace(/Ms$/, '').toUpperCase(), k),
        cell('stat', st, st),
        cell('measured', f(v.measured[k][st]), v.measured[k][st]),
        cell('kvpool', f(v.predicted[k][st]), v.predicted[k][st]),
        cell('differencePct', v.differencePct[k][st] === null ? '-' : `${v.differencePct[k][st]!.toFixed(2)} %`, v.differencePct[k][st]),
        ...(peer ? [cell('peer', f(pv), pv)] : []),
      ];
    }),
  );
  return reportPage({
    title: `kvpool validate: ${v.run}`,
    heading: `kvpool validate: ${v.run}, ${v.requests} requests of ${v.model}`,
    fixed: esc(`${s.timing}; engine ${s.engine}; max_num_seqs ${s.maxNumSeqs.value}, max_num_batched_tokens ${s.maxNumBatchedTokens.value}, TP ${s.tp.value}, DP ${s.dp.value}, ${s.numBlocks.value} KV blocks per rank (${s.numBlocks.source})`),
    warnings: v.notes,
    charts,
    svgs,
    head: ['figure', 'stat', 'measured (ms)', 'kvpool (ms)', 'difference', ...(peer ? [`${peer.simulator} (ms)`] : [])],
    rows,
    note: esc('Measured: first token - queued, last token - queued, (last - first) / (tokens - 1), from requests.jsonl; the time series is the run\'s timeseries.csv, whose clock starts with the run and not exactly at the first request: the two are drawn from their own 0 (docs/validation.md).'),
  });
}

/** Writes the report to `file` (HTML). */
export async function writeValidationReport(file: string, v: Validation): Promise<void> {
  if (typeof file !== 'string' || file === '') throw new TypeError(`file must be a path, got ${describe(file)}`);
  writeFileSync(file, await validationReportHtml(v));
}
