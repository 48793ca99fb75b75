// The fleet report's bar chart (docs/sweep.md, the report): a bar per
// router, grouped by fleet size, one panel per value of the other varied
// options (wrapped in rows), an optional target as a dashed line. Built to
// hold whatever a sweep accepted:
//
// - orders are given by index fields of the data, never as lists of values
//   (Vega-Lite turns a sort list into one nested expression per value: a
//   thousand panels overflowed the stack, and a label with U+2028 broke the
//   expression's parser), so no label ever reaches an expression;
// - one bar far above the others (an overloaded fleet) is cut at the top of
//   the axis with its value written on it, so that the other bars and the
//   target stay readable.

import type { VegaLiteSpec } from './report-page.js';

/** One bar's data: its fleet, its panel, its place in the orders, and the figures charted (null: no bar). */
export interface BarRow {
  engines: number;
  router: string;
  /** The router's place in the order of first appearance. */
  routerIndex: number;
  panel: string;
  /** The panel's place in the order of first appearance. */
  panelIndex: number;
  [field: string]: number | string | null;
}

export interface BarLayout {
  rows: readonly BarRow[];
  /** Panels (distinct `panel` values). */
  panels: number;
  /** Width of one panel's plot, px. */
  width: number;
  /** Panels per row of the chart. */
  columns: number;
}

/** How wide the charts may be before a panel goes to the next row (the page's text column, less the axis and legend). */
const CHART_ROOM_PX = 900;

/** A bar's data before the layout numbers its router and panel. */
export type BarInput = { engines: number; router: string; panel: string } & Record<string, number | string | null>;

/** The layout of `rows` (each with its engines, router and panel; the index fields are filled in here). */
export function barLayout(rows: readonly BarInput[]): BarLayout {
  const routers = new Map<string, number>();
  const panels = new Map<string, number>();
  const sizes = new Set<number>();
  for (const r of rows) {
    if (!routers.has(r.router)) routers.set(r.router, routers.size);
    if (!panels.has(r.panel)) panels.set(r.panel, panels.size);
    sizes.add(r.engines);
  }
  const full = rows.map((r) => ({ ...r, routerIndex: routers.get(r.router)!, panelIndex: panels.get(r.panel)! }) as BarRow);
  const width = Math.min(560, Math.max(160, 34 * routers.size * sizes.size + 30));
  return { rows: full, panels: panels.size, width, columns: Math.max(1, Math.min(panels.size, Math.floor(CHART_ROOM_PX / (width + 40)))) };
}

/**
 * Where to cut the axis, or undefined to draw it whole: when the largest
 * value is more than 4 times the larger of the median and the target, the
 * axis ends at 2.5 times that (bars above it are cut, their value written).
 */
export function clipLevel(values: readonly number[], target?: number): number | undefined {
  if (values.length < 2) return undefined;
  const sorted = Float64Array.from(values).sort();
  const median = sorted[Math.floor((sorted.length - 1) / 2)]!;
  const ref = Math.max(median, target ?? 0);
  const max = sorted[sorted.length - 1]!;
  return ref > 0 && max > 4 * ref ? niceCeil(2.5 * ref) : undefined;
}

/** The next of 1, 2, 2.5, 5 times a power of ten at or above x (an axis end people read at a glance). */
function niceCeil(x: number): number {
  const p = 10 ** Math.floor(Math.log10(x));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}

export interface BarAxis {
  /** d3 format of the values (descriptions, written values). */
  format: string;
  /** d3 format of the axis labels (default: `format`). */
  axisFormat?: string;
  /** False: never cut (a share, bounded by 1). */
  cut?: boolean;
}

/** The chart of `field` (title: the y axis), with `target` as a dashed line; a cut axis when one bar dwarfs the rest. */
export function barChart(layout: BarLayout, field: string, title: string, axis: BarAxis, target?: number): { spec: VegaLiteSpec; clippedAt: number | undefined } {
  const values: number[] = [];
  for (const r of layout.rows) {
    const v = r[field];
    if (typeof v === 'number') values.push(v);
  }
  const cut = axis.cut === false ? undefined : clipLevel(values, target);
  const x = { field: 'engines', type: 'ordinal', title: 'engines', axis: { labelAngle: 0 } };
  const xOffset = { field: 'router', type: 'nominal', sort: { field: 'routerIndex', op: 'min' } };
  const bar = {
    mark: { type: 'bar', clip: cut !== undefined },
    encoding: {
      x,
      xOffset,
      y: {
        field,
        type: 'quantitative',
        title: cut === undefined ? title : `${title}, cut at ${cut.toLocaleString('en-US')}`,
        format: axis.format,
        axis: { format: axis.axisFormat ?? axis.format },
        ...(cut !== undefined && { scale: { domain: [0, cut] } }),
      },
      color: { field: 'router', type: 'nominal', title: 'router', sort: { field: 'routerIndex', op: 'min' } },
    },
  };
  const layers: object[] = [bar];
  if (target !== undefined) {
    // Aggregated to one row (per panel) so that the rule is drawn once, not once per fleet.
    layers.push({ transform: [{ aggregate: [{ op: 'count', as: 'fleets' }] }], mark: { type: 'rule', color: '#c0392b', strokeDash: [6, 4], size: 2 }, encoding: { y: { datum: target } } });
  }
  if (cut !== undefined) {
    // The value of each cut bar, written up its top end.
    layers.push({
      transform: [{ filter: { field, gt: cut } }],
      mark: { type: 'text', angle: 270, align: 'right', baseline: 'middle', dx: -4, fontSize: 10, fontWeight: 'bold', color: '#fff' },
      encoding: { x, xOffset, y: { datum: cut, type: 'quantitative' }, text: { field, type: 'quantitative', format: axis.format } },
    });
  }
  const head = { $schema: 'https://vega.github.io/schema/vega-lite/v6.json', data: { values: layout.rows } };
  const plot = { width: layout.width, height: 240, ...(layers.length === 1 ? bar : { layer: layers }) };
  if (layout.panels <= 1) return { spec: { ...head, ...plot }, clippedAt: cut };
  const facet = { field: 'panel', type: 'nominal', title: null, sort: { field: 'panelIndex', op: 'min' }, header: { labelLimit: 400 } };
  return { spec: { ...head, facet, columns: layout.columns, spec: plot }, clippedAt: cut };
}
