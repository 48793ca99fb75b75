// The sweep report: charts drawn as SVG by Vega-Lite/Vega in Node (no
// browser, no network), in a self-contained HTML page with the results
// table, or alone as one SVG file. Vega is loaded only when a report is
// written, so the rest of the command line starts without it.

import { writeFileSync } from 'node:fs';
import type { ReplayRun } from '../replay/replay.js';
import { SWEEP_GRID_KEYS, type SweepGridKey } from './sweep.js';
import { checkReportArgs } from './report-args.js';
import { describe } from '../validate.js';
import { esc, reportPage, type ReportChart, type VegaLiteSpec } from './report-page.js';

export type { ReportChart, VegaLiteSpec };

const LABELS: Record<SweepGridKey, string> = {
  numBlocks: 'blocks per rank',
  blockSize: 'block size',
  dpSize: 'dp size',
  maxRunning: 'max running',
  seed: 'seed',
  eviction: 'eviction',
  hostBlocks: 'host blocks',
  storeBlocks: 'store blocks',
  slidingWindow: 'sliding window',
  linearStateSlots: 'linear-state slots',
};

/** "block size 16, host blocks 0": a run's values of the varied options other than `except`. */
function seriesLabel(r: ReplayRun, varied: readonly SweepGridKey[], except: readonly SweepGridKey[]): string {
  const parts = varied.filter((k) => !except.includes(k)).map((k) => `${LABELS[k]} ${String(r.config[k])}`);
  return parts.length > 0 ? parts.join(', ') : 'all';
}

/** A run's name in charts and the table: its varied option values. */
export function configLabel(r: ReplayRun, varied: readonly SweepGridKey[]): string {
  return varied.length > 0 ? varied.map((k) => `${LABELS[k]} ${String(r.config[k])}`).join(', ') : 'the configuration';
}

/** The charts of a sweep, as Vega-Lite specs with the data inline. */
export function reportCharts(runs: readonly ReplayRun[], varied: readonly SweepGridKey[]): ReportChart[] {
  const capacities = [...new Set(runs.map((r) => r.config.numBlocks))].sort((a, b) => a - b);
  const logX = capacities.length > 1;
  const colorKey: SweepGridKey = varied.includes('eviction') || !varied.some((k) => k !== 'numBlocks') ? 'eviction' : varied.find((k) => k !== 'numBlocks')!;
  const rows = runs.map((r) => ({
    config: configLabel(r, varied),
    numBlocks: r.config.numBlocks,
    color: String(r.config[colorKey]),
    series: seriesLabel(r, varied, ['numBlocks', colorKey]),
    hitRate: r.hitRate,
    evictedBlocks: r.evictedBlocks,
    hostBlocks: r.config.hostBlocks,
    withHost: r.mode === 'host-tier' && r.promptBlocks > 0 ? (r.matchedBlocks + r.hostTier.blocksLoaded) / r.promptBlocks : r.hitRate,
  }));
  const x = {
    field: 'numBlocks',
    type: 'quantitative' as const,
    title: logX ? 'blocks per rank (log scale)' : 'blocks per rank',
    scale: logX ? { type: 'log' as const, base: 2, nice: false, padding: 16 } : { zero: false, padding: 16 },
    axis: { values: capacities, format: ',d', labelAngle: capacities.length > 5 ? -40 : 0 },
  };
  const color = { field: 'color', type: 'nominal' as const, title: LABELS[colorKey] };
  const manySeries = new Set(rows.map((r) => r.series)).size > 1;
  const dash = manySeries ? { strokeDash: { field: 'series', type: 'nominal' as const, title: 'with', legend: { labelLimit: 320, symbolType: 'stroke', symbolStrokeWidth: 2 } } } : {};
  // Vega-Lite's typings leave `format` off position channels, but the mark
  // descriptions (aria-label, read by the report test) use it.
  const line = (field: string, title: string, yAxis: object, extra: object = {}): VegaLiteSpec => spec({
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    width: 560,
    height: 300,
    data: { values: rows },
    mark: { type: 'line', point: { size: 60, filled: true } },
    encoding: { x, y: { field, type: 'quantitative', title, ...yAxis }, color, ...dash, ...extra },
  });
  const charts: ReportChart[] = [
    {
      id: 'hit-rate',
      title: 'Hit rate against capacity',
      explain: 'Prompt blocks found in the prefix cache, as a share of all full prompt blocks, for each number of blocks per rank.',
      spec: line('hitRate', 'hit rate', { axis: { format: '.0%' }, format: '.4%' }),
    },
    {
      id: 'evictions',
      title: 'Evictions against capacity',
      explain: 'Prefix-cache entries evicted to make room over the whole replay.',
      spec: line('evictedBlocks', 'evicted blocks', { axis: { format: '~s' }, format: ',d' }),
    },
  ];
  const host = runs.filter((r) => r.mode === 'host-tier');
  charts.push(
    host.length === 0
      ? { id: 'host-tier', title: 'What a host tier adds', explain: '', spec: null, missing: 'No configuration of this sweep has a host tier (try --host-blocks 0,262144).' }
      : {
          id: 'host-tier',
          title: 'What a host tier adds',
          explain: 'Prompt blocks served without recomputation — found on the device, or loaded back from the host tier — as a share of all full prompt blocks. Host blocks 0 is the device alone.',
          spec: spec({
            ...line('withHost', 'served from cache (device + host)', { axis: { format: '.0%' }, format: '.4%' }),
            encoding: {
              x,
              y: { field: 'withHost', type: 'quantitative', title: 'served from cache (device + host)', axis: { format: '.0%' }, format: '.4%' },
              color: { field: 'hostBlocks', type: 'ordinal', title: 'host blocks' },
              strokeDash: { field: 'color', type: 'nominal', title: LABELS[colorKey], legend: { symbolType: 'stroke', symbolStrokeWidth: 2 } },
              detail: { field: 'series', type: 'nominal' },
            },
          }),
        },
  );
  const multi = runs.filter((r) => r.ranks.length > 1);
  const rankRows = multi.flatMap((r) =>
    r.ranks.map((k) => ({ config: configLabel(r, varied), rank: String(k.dpRank), allocatedBlocks: k.allocatedBlocks, hitBlocks: k.hitBlocks })),
  );
  charts.push(
    multi.length === 0
      ? { id: 'ranks', title: 'Balance across dp ranks', explain: '', spec: null, missing: 'Every configuration of this sweep has one dp rank (try --dp-size 2,4).' }
      : {
          id: 'ranks',
          title: 'Balance across dp ranks',
          explain: 'Blocks handed out on each dp rank: a new request goes to the rank with the most free blocks, so even bars mean an even load.',
          spec: spec({
            $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
            width: { step: 14 },
            height: 260,
            data: { values: rankRows },
            mark: 'bar',
            encoding: {
              x: { field: 'config', type: 'nominal', title: null, axis: { labelAngle: -30, labelLimit: 400 } },
              xOffset: { field: 'rank', type: 'nominal' },
              y: { field: 'allocatedBlocks', type: 'quantitative', title: 'blocks allocated', axis: { format: '~s' }, format: ',d' },
              color: { field: 'rank', type: 'nominal', title: 'dp rank' },
            },
          }),
        },
  );
  return charts;
}

function spec(s: object): VegaLiteSpec {
  return s as VegaLiteSpec;
}

/** Each distinct warning once, with the (0-based) configurations that gave it. */
export function groupWarnings(runs: ReadonlyArray<{ warnings: readonly string[] }>): Array<{ message: string; configs: number[] }> {
  const by = new Map<string, number[]>();
  runs.forEach((r, i) => r.warnings.forEach((w) => by.set(w, [...(by.get(w) ?? []), i])));
  return [...by].map(([message, configs]) => ({ message, configs }));
}

/** Renders a Vega-Lite spec to an SVG string (Vega's headless renderer: no browser, no canvas needed). */
export async function renderSvg(spec: VegaLiteSpec): Promise<string> {
  const [vega, vl] = await Promise.all([import('vega'), import('vega-lite')]);
  const view = new vega.View(vega.parse(vl.compile(spec as unknown as Parameters<typeof vl.compile>[0]).spec), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** The HTML page: configuration, charts, results table, all inline (no script, no network; opens from file://). */
export async function reportHtml(runs: readonly ReplayRun[], varied: readonly SweepGridKey[]): Promise<string> {
  checkReportArgs(runs, varied, SWEEP_GRID_KEYS);
  const charts = reportCharts(runs, varied);
  const svgs = await Promise.all(charts.map((c) => (c.spec ? renderSvg(c.spec) : Promise.resolve(''))));
  const first = runs[0]!.config;
  const pct = (x: number) => `${(x * 100).toFixed(4)} %`;
  const n = (x: number) => x.toLocaleString('en-US');
  const anyHost = runs.some((r) => r.mode === 'host-tier');
  const head = [...varied.map((k) => LABELS[k]), 'hit rate', 'matched blocks', 'prompt blocks', 'evicted blocks', ...(anyHost ? ['host hit blocks', 'blocks loaded'] : []), 'rejected', 'truncated', 'seconds'];
  const rows = runs.map((r) => [
    ...varied.map((k) => ({ key: k, text: String(r.config[k]), value: String(r.config[k]) })),
    { key: 'hitRate', text: pct(r.hitRate), value: String(r.hitRate) },
    { key: 'matchedBlocks', text: n(r.matchedBlocks), value: String(r.matchedBlocks) },
    { key: 'promptBlocks', text: n(r.promptBlocks), value: String(r.promptBlocks) },
    { key: 'evictedBlocks', text: n(r.evictedBlocks), value: String(r.evictedBlocks) },
    ...(anyHost
      ? r.mode === 'host-tier'
        ? [{ key: 'hostHitBlocks', text: n(r.hostTier.hostHitBlocks), value: String(r.hostTier.hostHitBlocks) }, { key: 'blocksLoaded', text: n(r.hostTier.blocksLoaded), value: String(r.hostTier.blocksLoaded) }]
        : [{ key: 'hostHitBlocks', text: '-', value: '' }, { key: 'blocksLoaded', text: '-', value: '' }]
      : []),
    { key: 'rejected', text: n(r.rejected), value: String(r.rejected) },
    { key: 'truncated', text: n(r.truncated), value: String(r.truncated) },
    { key: 'seconds', text: r.seconds.toFixed(2), value: String(r.seconds) },
  ]);
  return reportPage({
    title: `kvpool sweep: ${first.trace}`,
    heading: `kvpool sweep: ${first.trace}, ${runs.length} configurations`,
    fixed: fixedOptions(runs.map((r) => r.config), varied),
    warnings: groupWarnings(runs).map(({ message, configs }) => `${message} (${configs.map((i) => configLabel(runs[i]!, varied)).join('; ')})`),
    charts,
    svgs,
    head,
    rows,
    note: 'Hit rate = matched blocks / prompt blocks. Every field is explained by <code>kvpool replay --help</code> and in kvpool\'s docs/replay.md; the same results as data: <code>kvpool sweep --format csv</code> or <code>--format json</code>.',
  });
}

/** Figures a run's configuration reports that no flag sets: shown by name, as the command's configuration line shows them. */
const REPORTED_FIGURES: Readonly<Record<string, string>> = { kvBlocksPerEngine: 'KV blocks per engine', kvGibPerEngine: 'KV GiB per engine' };

/**
 * "--block-size 16 · trace x" (HTML): the options every run shares (the
 * same value in each, whether or not a grid key varied them: a sweep over
 * --num-blocks varies the KV blocks per engine too), as the flags that
 * give them (a switch only when on; the timing model by its name, which is
 * not a value of --timing; an open loop's concurrency 0 left out; vLLM's
 * own scheduler and its reserve on by default left out, as --engine vllm
 * says them; a figure no flag sets by its name).
 */
export function fixedOptions(configs: readonly object[], varied: readonly string[]): string {
  const flag = (k: string) => `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
  const same = (k: string, v: unknown) => configs.every((c) => JSON.stringify((c as Record<string, unknown>)[k]) === JSON.stringify(v));
  return Object.entries(configs[0] ?? {})
    .filter(([k, v]) => !varied.includes(k) && same(k, v) && v !== null && v !== undefined)
    .map(([k, v]): string | null => {
      if (k === 'schedulerReserveFullIsl') return v === false ? '--no-scheduler-reserve-full-isl' : null;
      if (v === false || (k === 'hostBlocks' && v === 0) || (k === 'concurrency' && v === 0) || (k === 'scheduler' && v === 'vllm')) return null;
      if (k === 'trace') return `trace ${esc(String(v))}`;
      if (k === 'timing') return `timing model ${esc(String(v))}`;
      if (REPORTED_FIGURES[k] !== undefined) return `${REPORTED_FIGURES[k]} ${esc(String(v))}`;
      if (v === true) return esc(flag(k));
      return `${esc(flag(k))} ${esc(Array.isArray(v) ? v.join(',') : String(v))}`;
    })
    .filter((x) => x !== null)
    .join(' · ');
}

/** Charts stacked in one SVG. */
export async function stackedSvg(charts: readonly ReportChart[]): Promise<string> {
  const spec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    vconcat: charts.filter((c) => c.spec !== null).map((c) => {
      const { $schema: _s, ...inner } = c.spec!;
      return { ...inner, title: c.title };
    }),
    resolve: { scale: { color: 'independent', strokeDash: 'independent' } },
  } as VegaLiteSpec;
  return renderSvg(spec);
}

/** The charts alone, stacked in one SVG. */
export async function reportSvg(runs: readonly ReplayRun[], varied: readonly SweepGridKey[]): Promise<string> {
  checkReportArgs(runs, varied, SWEEP_GRID_KEYS);
  return stackedSvg(reportCharts(runs, varied));
}

/** Writes the report: `.svg` the charts alone, anything else (`.html`) the page. */
export async function writeReport(file: string, runs: readonly ReplayRun[], varied: readonly SweepGridKey[]): Promise<void> {
  if (typeof file !== 'string') throw new TypeError(`file must be a path, got ${describe(file)}`);
  const text = /\.svg$/i.test(file) ? await reportSvg(runs, varied) : await reportHtml(runs, varied);
  writeFileSync(file, text);
}
