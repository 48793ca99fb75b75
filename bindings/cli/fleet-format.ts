// Output of fleet results: a table for people (the fleet's figures, then a
// row per engine), CSV and JSON for programs. JSON leaves out each engine's
// full replay result (`engines[].run`, the library's): its figures are in
// the engine's row.

import type { FleetRun } from '../fleet/fleet-result.js';
import { csvOf, formatConfig, get, percent } from './format.js';
import { CONFIG_GLOSSARY } from './glossary.js';
import { FLEET_CONFIG_GLOSSARY, FLEET_ENGINE_GLOSSARY, FLEET_GLOSSARY } from './fleet-glossary.js';

function num(key: string, v: number): string {
  if (key.endsWith('hitRate')) return percent(v);
  return v.toLocaleString('en-US');
}

/** The result as JSON has it (engines without their full replay result). */
export function fleetJson(r: FleetRun): unknown {
  return { ...r, engines: r.engines.map(({ run: _run, ...e }) => e) };
}

export function formatFleet(r: FleetRun, title: string): string {
  const fleetParts = FLEET_CONFIG_GLOSSARY.map((e) => `${e.label} ${String(get(r, e.key))}`).join(' · ');
  const rows = FLEET_GLOSSARY.map((e) => [e.label, num(e.key, get(r, e.key) as number)] as const);
  const w = Math.max(...rows.map(([k]) => k.length));
  const vw = Math.max(...rows.map(([, v]) => v.length));
  const head = FLEET_ENGINE_GLOSSARY.map((e) => e.label);
  const body = r.engines.map((e) => FLEET_ENGINE_GLOSSARY.map((g) => num(g.key, get(e, g.key.slice('engines[].'.length)) as number)));
  const cw = head.map((h, c) => Math.max(h.length, ...body.map((b) => b[c]!.length)));
  const line = (cells: readonly string[]) => '  ' + cells.map((x, c) => x.padStart(cw[c]!)).join('  ');
  return [title, `  ${fleetParts}`, `  ${formatConfig(r.config)}`, '', ...rows.map(([k, v]) => `  ${k.padEnd(w)}  ${v.padStart(vw)}`), '', line(head), ...body.map(line)].join('\n');
}

/** The flat columns: config.* (replay's, then the fleet's), the fleet's figures, warnings. Engine rows are JSON-only. */
export function fleetCsvColumns(): string[] {
  return [...CONFIG_GLOSSARY, ...FLEET_CONFIG_GLOSSARY, ...FLEET_GLOSSARY].map((e) => e.key).concat('warnings');
}

export function formatFleetCsv(runs: readonly FleetRun[]): string {
  return csvOf(runs, fleetCsvColumns());
}

/** Several fleets side by side: a row each (router, engines, the fleet's figures), the shared configuration above. */
export function formatFleetComparison(runs: readonly FleetRun[], title: string): string {
  const cols = FLEET_GLOSSARY.filter((e) => !['requests', 'truncated', 'promptBlocks'].includes(e.key));
  const head = ['router', 'engines', ...cols.map((e) => e.label)];
  const body = runs.map((r) => [r.config.router, String(r.config.engines), ...cols.map((e) => num(e.key, get(r, e.key) as number))]);
  const cw = head.map((h, c) => Math.max(h.length, ...body.map((b) => b[c]!.length)));
  const line = (cells: readonly string[]) => '  ' + cells.map((x, c) => (c === 0 ? x.padEnd(cw[c]!) : x.padStart(cw[c]!))).join('  ');
  const c = runs[0]!.config;
  const shared = `step ms ${c.stepMs} · arrival ${c.arrival} · prefix weight ${c.prefixWeight} · load weight ${c.loadWeight} · affinity blocks ${c.affinityBlocks}`;
  return [title, `  ${shared}`, `  ${formatConfig(c)}`, '', line(head), ...body.map(line)].join('\n');
}
