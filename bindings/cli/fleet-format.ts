// Output of fleet results: a table for people (the fleet's figures, then a
// row per engine), CSV and JSON for programs. JSON leaves out each engine's
// full replay result (`engines[].run`, the library's): its figures are in
// the engine's row. A timed run's latency adds to each (latency-format.ts).

import type { FleetRun } from '../fleet/fleet-result.js';
import { columnWidths, csvOf, formatConfig, get, percent } from './format.js';
import { CONFIG_GLOSSARY } from './glossary.js';
import { FLEET_CONFIG_GLOSSARY, FLEET_ENGINE_GLOSSARY, FLEET_GLOSSARY, FLEET_VLLM_CONFIG_GLOSSARY } from './fleet-glossary.js';
import type { FleetConfig } from '../fleet/fleet-options.js';
import { COMPARISON_LATENCY_HEAD, comparisonLatencyCells, latencyCsvColumns, latencyEngineColumns, latencyJson, latencyLines, timedConfigParts } from './latency-format.js';

function num(key: string, v: number): string {
  if (key.endsWith('hitRate')) return percent(v);
  return v.toLocaleString('en-US');
}

/** The result as JSON has it (engines without their full replay result; a timed run's per-request times only with `perRequest`). */
export function fleetJson(r: FleetRun, perRequest = false): unknown {
  return { ...r, engines: r.engines.map(({ run: _run, ...e }) => e), ...latencyJson(r.latency, perRequest) };
}

/** "engine vllm · max num batched tokens 8192 · ...": a fleet of vLLM engines' own options ('' for xllm). */
export function engineConfigParts(c: FleetConfig): string {
  if (c.engine === undefined) return '';
  return FLEET_VLLM_CONFIG_GLOSSARY.map((e) => {
    const v = get(c, e.key.slice('config.'.length));
    return `${e.label} ${typeof v === 'boolean' ? (v ? 'yes' : 'no') : String(v)}`;
  }).join(' · ');
}

/** The fleet's configuration line: on the millisecond clock, the timed options in place of the step; a vLLM fleet's engine options. */
function fleetParts(r: FleetRun): string {
  const timed = timedConfigParts(r.config);
  const engine = engineConfigParts(r.config);
  const parts = FLEET_CONFIG_GLOSSARY.filter((e) => timed === '' || e.key !== 'config.stepMs').map((e) => `${e.label} ${String(get(r, e.key))}`);
  return [...(engine === '' ? [] : [engine]), ...parts, ...(timed === '' ? [] : [timed])].join(' · ');
}

export function formatFleet(r: FleetRun, title: string): string {
  const rows = FLEET_GLOSSARY.map((e) => [e.label, num(e.key, get(r, e.key) as number)] as const);
  const w = Math.max(...rows.map(([k]) => k.length));
  const vw = Math.max(...rows.map(([, v]) => v.length));
  const timed = r.latency === undefined ? undefined : latencyEngineColumns(r.latency);
  const head = [...FLEET_ENGINE_GLOSSARY.map((e) => e.label), ...(timed?.head ?? [])];
  const body = r.engines.map((e, i) => [...FLEET_ENGINE_GLOSSARY.map((g) => num(g.key, get(e, g.key.slice('engines[].'.length)) as number)), ...(timed?.cells(i) ?? [])]);
  const cw = columnWidths(head, body);
  const line = (cells: readonly string[]) => '  ' + cells.map((x, c) => x.padStart(cw[c]!)).join('  ');
  const latency = r.latency === undefined ? [] : ['', ...latencyLines(r.latency)];
  return [title, `  ${fleetParts(r)}`, `  ${formatConfig(r.config)}`, '', ...rows.map(([k, v]) => `  ${k.padEnd(w)}  ${v.padStart(vw)}`), ...latency, '', line(head), ...body.map(line)].join('\n');
}

/** The flat columns: config.* (replay's, then the fleet's), the fleet's figures, a timed run's latency scalars, warnings. Engine rows are JSON-only. */
export function fleetCsvColumns(runs: readonly FleetRun[]): string[] {
  const cols = [...CONFIG_GLOSSARY, ...FLEET_CONFIG_GLOSSARY, ...FLEET_GLOSSARY].map((e) => e.key).concat(latencyCsvColumns(runs));
  // A fleet of vLLM engines adds its engine's options (an xllm fleet's columns are what they always were).
  const vllm = runs.some((r) => r.config.engine !== undefined) ? FLEET_VLLM_CONFIG_GLOSSARY.map((e) => e.key).filter((k) => !cols.includes(k)) : [];
  return [...cols, ...vllm, 'warnings'];
}

export function formatFleetCsv(runs: readonly FleetRun[]): string {
  return csvOf(runs, fleetCsvColumns(runs));
}

/** Several fleets side by side: a row each (router, engines, the fleet's figures), the shared configuration above. */
export function formatFleetComparison(runs: readonly FleetRun[], title: string): string {
  const cols = FLEET_GLOSSARY.filter((e) => !['requests', 'truncated', 'finishedEarly', 'promptBlocks'].includes(e.key));
  const timed = runs.some((r) => r.latency !== undefined);
  const head = ['router', 'engines', ...cols.map((e) => e.label), ...(timed ? COMPARISON_LATENCY_HEAD : [])];
  const body = runs.map((r) => [r.config.router, String(r.config.engines), ...cols.map((e) => num(e.key, get(r, e.key) as number)), ...(timed ? comparisonLatencyCells(r) : [])]);
  const cw = columnWidths(head, body);
  const line = (cells: readonly string[]) => '  ' + cells.map((x, c) => (c === 0 ? x.padEnd(cw[c]!) : x.padStart(cw[c]!))).join('  ');
  const c = runs[0]!.config;
  const timedParts = timedConfigParts(c);
  const engine = engineConfigParts(c);
  const clock = (engine === '' ? '' : `${engine} · `) + (timedParts === '' ? `step ms ${c.stepMs} · ` : '');
  const shared = `${clock}arrival ${c.arrival} · prefix weight ${c.prefixWeight} · load weight ${c.loadWeight} · affinity blocks ${c.affinityBlocks}${timedParts === '' ? '' : ` · ${timedParts}`}`;
  return [title, `  ${shared}`, `  ${formatConfig(c)}`, '', line(head), ...body.map(line)].join('\n');
}
