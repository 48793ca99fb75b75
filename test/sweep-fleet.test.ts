// `fleetSweep()` and `kvpool sweep --router/--engines`: every grid point a
// fleet, run on the sweep's worker threads, gives exactly fleet()'s result
// for the same configuration; the table, CSV and JSON show the fleet
// figures; the report has a chart per fleet figure, each bar the table's
// value; without the fleet flags the sweep stays a plain sweep.

import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FLEET_ENGINE_GLOSSARY, FLEET_GLOSSARY } from '../bindings/cli/fleet-glossary.js';
import { RESULT_GLOSSARY } from '../bindings/cli/glossary.js';
import { main } from '../bindings/cli/main.js';
import { fleetSync } from '../bindings/fleet/fleet.js';
import type { FleetRun } from '../bindings/fleet/fleet-result.js';
import { fleetSweep, fleetSweepConfigurations } from '../bindings/node/fleet-sweep.js';
import { generateWorkload } from '../bindings/replay/workload.js';
import { capture } from './support/capture.js';

/** A fleet result without the engines' loop timings. */
const timingFree = (r: FleetRun) => ({ ...r, engines: r.engines.map((e) => ({ ...e, run: { ...e.run, seconds: 0, allocateCallsPerSecond: 0 } })) });

describe('fleetSweepConfigurations', () => {
  it('is the replay grid, then fleet size, then router, the first varying slowest', () => {
    const c = fleetSweepConfigurations({ requests: 10 }, { numBlocks: [100, 200], engines: [2, 4], router: ['round-robin', 'least-loaded'] });
    expect(c.length).toBe(8);
    expect(c.slice(0, 3)).toEqual([
      { requests: 10, numBlocks: 100, engines: 2, router: 'round-robin' },
      { requests: 10, numBlocks: 100, engines: 2, router: 'least-loaded' },
      { requests: 10, numBlocks: 100, engines: 4, router: 'round-robin' },
    ]);
    expect(fleetSweepConfigurations({}, { router: ['least-loaded'] })).toEqual([{ engines: 4, router: 'least-loaded' }]);
  });

  it('rejects an empty axis or an unknown key', () => {
    expect(() => fleetSweepConfigurations({}, { engines: [] })).toThrow(/grid.engines must be a non-empty array/);
    expect(() => fleetSweepConfigurations({}, { bogus: [1] } as never)).toThrow(/grid: unknown option "bogus"/);
  });
});

describe('fleetSweep()', () => {
  const trace = generateWorkload({ requests: 200, seed: 5 });
  const base = { trace, maxRunning: 4, numBlocks: 600, arrival: 'instant' as const };

  it('gives, on worker threads, exactly fleet()\'s result for every configuration, in grid order', async () => {
    let last = { requestsDone: 0, requestsTotal: 0, runsDone: 0, runsTotal: 0 };
    const grid = { eviction: ['lru', 'lfu'] as const, engines: [2, 3], router: ['round-robin', 'approximate-prefix'] as const };
    const runs = await fleetSweep({ ...base, grid, workers: 2, onProgress: (p) => (last = p) });
    const configs = fleetSweepConfigurations(base, grid);
    expect(runs.length).toBe(8);
    for (const [i, c] of configs.entries()) expect(timingFree(runs[i]!), `configuration ${i}`).toEqual(timingFree(fleetSync(c)));
    expect(runs.map((r) => `${r.config.eviction}/${r.config.engines}/${r.config.router}`)).toEqual(configs.map((c) => `${c.eviction}/${c.engines}/${c.router}`));
    expect(new Set(runs.map((r) => r.hitRate)).size).toBeGreaterThan(2);
    expect(runs.some((r) => r.queueing.meanSteps > 0)).toBe(true);
    expect(last).toEqual({ requestsDone: 8 * 200, requestsTotal: 8 * 200, runsDone: 8, runsTotal: 8 });
  });

  it('checks every configuration before starting, naming the one that is wrong', async () => {
    await expect(fleetSweep({ requests: 10, stepMs: -1, grid: { engines: [2] } })).rejects.toThrow(/configuration 1 of 1 \(engines=2 router=round-robin\): options.stepMs/);
    await expect(fleetSweep({ requests: 10, grid: { engines: [2] }, onProgress: 5 as never })).rejects.toThrow(new TypeError('options.onProgress must be a function, got 5'));
  });
});

describe('kvpool sweep --router --engines', () => {
  const ARGS = ['sweep', '--requests', '200', '--max-running', '4', '--arrival', 'instant', '--num-blocks', '600,1200', '--router', 'round-robin,least-loaded', '--engines', '2,3', '--workers', '2'];

  it('prints a row per fleet with the fleet figures, equal to fleet()\'s', async () => {
    const r = await capture(() => main(ARGS));
    expect(r.code).toBe(0);
    const lines = r.out.trimEnd().split('\n');
    expect(lines[0]).toBe('kvpool sweep: built-in workload (200 requests), 8 fleets');
    expect(lines[1]).toMatch(/^\s*num-blocks\s+router\s+engines\s+hit rate\s+queue mean \(steps\)\s+queue p99 \(steps\)\s+imbalance\s+rejected$/);
    expect(lines.length).toBe(10);
    const f = fleetSync({ requests: 200, maxRunning: 4, arrival: 'instant', numBlocks: 1200, router: 'least-loaded', engines: 3 });
    const cells = lines[9]!.trim().split(/\s{2,}/);
    const two = (x: number) => x.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 });
    expect(cells).toEqual(['1200', 'least-loaded', '3', `${(f.hitRate * 100).toFixed(2)} %`, two(f.queueing.meanSteps), f.queueing.p99Steps.toLocaleString('en-US'), f.loadImbalance.toFixed(3), String(f.rejected)]);
    // The queue mean has thousands separators, as the queue p99 beside it (2,554.85, not 2554.85).
    expect(f.queueing.meanSteps).toBeGreaterThan(1000);
    expect(cells[4]).toMatch(/^\d{1,3}(,\d{3})+\.\d\d$/);
  });

  it('--format json is the fleet results (as kvpool fleet prints them), csv a row each', async () => {
    const j = await capture(() => main([...ARGS, '--format', 'json']));
    const arr = JSON.parse(j.out) as Array<Record<string, unknown> & { config: { router: string; engines: number; numBlocks: number }; engines: Array<Record<string, unknown>> }>;
    expect(arr.map((x) => `${x.config.numBlocks}/${x.config.engines}/${x.config.router}`)).toEqual(
      ['600/2/round-robin', '600/2/least-loaded', '600/3/round-robin', '600/3/least-loaded', '1200/2/round-robin', '1200/2/least-loaded', '1200/3/round-robin', '1200/3/least-loaded'],
    );
    const f = fleetSync({ requests: 200, maxRunning: 4, arrival: 'instant', numBlocks: 600, router: 'round-robin', engines: 2 });
    expect(arr[0]!['hitRate']).toBe(f.hitRate);
    expect(arr[0]!['queueing']).toEqual(f.queueing);
    expect(arr[0]!['loadImbalance']).toBe(f.loadImbalance);
    expect(arr[0]!.engines[0]!['run']).toBeUndefined();
    const c = await capture(() => main([...ARGS, '--format', 'csv']));
    const rows = c.out.trimEnd().split('\n');
    expect(rows.length).toBe(9);
    const head = rows[0]!.split(',');
    for (const k of ['config.router', 'config.engines', 'hitRate', 'queueing.meanSteps', 'queueing.p99Steps', 'loadImbalance', 'rejected']) expect(head).toContain(k);
    expect(rows[1]!.split(',')[head.indexOf('loadImbalance')]).toBe(String(f.loadImbalance));
  });

  it('--report: a chart per fleet figure, each bar the value of the results table', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvpool-fleet-report-'));
    const html = join(dir, 'fleets.html');
    const r = await capture(() => main(['sweep', '--requests', '200', '--max-running', '4', '--arrival', 'instant', '--num-blocks', '300', '--router', 'round-robin,least-loaded,approximate-prefix', '--engines', '2,4', '--workers', '2', '--report', html, '--format', 'json']));
    expect(r.code).toBe(0);
    const text = readFileSync(html, 'utf8');
    expect(text).not.toMatch(/<script|<link|<img|<iframe|@import|url\(/i);
    const section = (id: string) => text.slice(text.indexOf(`<section id="${id}">`), text.indexOf('</section>', text.indexOf(`<section id="${id}">`)));
    const rows = [...section('results').matchAll(/<tr><td.*?<\/tr>/g)].map((m) => Object.fromEntries([...m[0].matchAll(/data-key="(\w+)" data-value="([^"]*)"/g)].map((x) => [x[1]!, x[2]!])));
    expect(rows.length).toBe(6);
    const row = (router: string, engines: string) => rows.find((x) => x['router'] === router && x['engines'] === engines)!;
    const charts: Array<[string, string, string, (v: string) => string]> = [
      ['fleet-hit-rate', 'fleet hit rate', 'hitRate', (v) => `${(Number(v) * 100).toFixed(4)}%`],
      ['queueing-mean', 'queueing mean (steps)', 'queueMean', (v) => Number(v).toFixed(2)],
      ['queueing-p99', 'queueing p99 (steps)', 'queueP99', (v) => Number(v).toLocaleString('en-US')],
      ['load-imbalance', 'load imbalance', 'loadImbalance', (v) => Number(v).toFixed(3)],
    ];
    for (const [id, title, key, fmt] of charts) {
      const bars = [...section(id).matchAll(/aria-label="([^"]*)" role="graphics-symbol" aria-roledescription="bar"/g)].map((m) => Object.fromEntries(m[1]!.split('; ').map((kv) => kv.split(': '))));
      expect(bars.length, id).toBe(6);
      for (const b of bars) expect(b[title], `${id} ${JSON.stringify(b)}`).toBe(fmt(row(b['router']!, b['engines']!)[key]!));
    }
    expect(new Set(rows.map((x) => x['hitRate'])).size).toBeGreaterThan(1);
  });

  it('--help explains the replay fields and, for fleet sweeps, the fleet fields, as kvpool fleet --help words them', async () => {
    const r = await capture(() => main(['sweep', '--help']));
    expect(r.code).toBe(0);
    for (const e of RESULT_GLOSSARY) expect(r.out).toContain(`${e.key} `);
    const fleetHelp = (await capture(() => main(['fleet', '--help']))).out;
    const fleetPart = r.out.slice(r.out.indexOf('With --router, --engines or --engine'));
    for (const e of [...FLEET_GLOSSARY, ...FLEET_ENGINE_GLOSSARY]) {
      const line = fleetHelp.split('\n').find((l) => l.trimStart().startsWith(`${e.key} `))!;
      expect(fleetPart, e.key).toContain(line);
    }
  });

  it('without --router and --engines it is the plain sweep; a fleet-only flag alone is refused', async () => {
    const plain = await capture(() => main(['sweep', '--requests', '50', '--num-blocks', '400,800', '--workers', '1']));
    expect(plain.out.split('\n')[1]).toMatch(/^\s*num-blocks\s+hit rate\s+matched\s+evicted/);
    const stray = await capture(() => main(['sweep', '--requests', '50', '--step-ms', '5']));
    expect(stray.code).toBe(1);
    expect(stray.err).toMatch(/--step-ms applies to fleets: give --router or --engines too/);
  });
});
