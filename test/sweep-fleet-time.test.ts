// Timed fleet sweeps: the timed options as sweep axes (scheduler, token
// budget, speed-up, concurrency), each grid point exactly fleet()'s timed
// run; the table's latency columns; the SLO answer (the smallest fleet per
// router and other axes) against a brute force over the runs; the report's
// latency charts with the SLO's line; and what is refused.

import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import { fleetSync } from '../bindings/fleet/fleet.js';
import type { FleetRun } from '../bindings/fleet/fleet-result.js';
import { meetsSlo } from '../bindings/fleet/slo-search.js';
import { fleetSweep, fleetSweepConfigurations } from '../bindings/node/fleet-sweep.js';
import { fleetReportCharts } from '../bindings/node/fleet-report.js';
import { timingModel } from '../bindings/timing/timing-model.js';
import { capture } from './support/capture.js';

/** A fleet result without the engines' loop timings. */
const timingFree = (r: FleetRun) => ({ ...r, engines: r.engines.map((e) => ({ ...e, run: { ...e.run, seconds: 0, allocateCallsPerSecond: 0 } })) });

type Json = { config: { router: string; engines: number; numBlocks: number; speedup: number; scheduler: string }; rejected: number; truncated: number; engines: Array<{ finishedEarly: number }>; latency: { ttftMs: { p99: number }; itlMs: { p99: number } } };
type Answer = { label: string; router: string; engines: number | null; numBlocks: number | null; ttftMsP99: number | null };

describe('fleetSweepConfigurations with timed axes', () => {
  it('varies the replay grid slowest, then scheduler, token budget, speed-up, concurrency, engines, router', () => {
    const c = fleetSweepConfigurations({ requests: 10, timing: true }, { numBlocks: [100, 200], speedup: [1, 2], scheduler: ['xllm', 'continuous'], engines: [2], router: ['round-robin'] });
    expect(c.map((x) => `${x.numBlocks}/${x.scheduler}/${x.speedup}`)).toEqual([
      '100/xllm/1', '100/xllm/2', '100/continuous/1', '100/continuous/2', '200/xllm/1', '200/xllm/2', '200/continuous/1', '200/continuous/2',
    ]);
    expect(c[0]).toEqual({ requests: 10, timing: true, numBlocks: 100, scheduler: 'xllm', speedup: 1, engines: 2, router: 'round-robin' });
    // Axes not given are left out, so a step-clock fleet gets none of them.
    expect(fleetSweepConfigurations({}, { engines: [2] })).toEqual([{ engines: 2, router: 'round-robin' }]);
    expect(() => fleetSweepConfigurations({}, { concurrency: [] })).toThrow(/grid.concurrency must be a non-empty array/);
  });
});

describe('fleetSweep() timed', () => {
  const base = { requests: 120, maxRunning: 4, numBlocks: 2400, timing: true as const };

  it('gives exactly fleet()\'s timed run at every grid point, latency included', async () => {
    const grid = { scheduler: ['xllm', 'continuous'] as const, speedup: [0.02, 0.05], engines: [1, 3] };
    const runs = await fleetSweep({ ...base, grid, workers: 2, perRequest: true });
    const configs = fleetSweepConfigurations(base, grid);
    expect(runs.length).toBe(8);
    for (const [i, c] of configs.entries()) expect(timingFree(runs[i]!), `configuration ${i}`).toEqual(timingFree(fleetSync(c)));
    expect(runs.every((r) => r.latency !== undefined)).toBe(true);
    // Without perRequest a sweep keeps every figure and leaves out only the token times (most of a run's size).
    const lean = await fleetSweep({ ...base, grid: { ...grid, engines: [3] }, workers: 2 });
    for (const [i, r] of lean.entries()) {
      const whole = runs[2 * i + 1]!;
      expect(r.latency!.requests.stepEndMs).toEqual([]);
      expect(r.latency!.requests.tokenSteps).toEqual([]);
      expect(whole.latency!.requests.stepEndMs.flat().length).toBeGreaterThan(0);
      const { requests: a, ...figures } = r.latency!;
      const { requests: b, ...wholeFigures } = whole.latency!;
      expect(timingFree({ ...r, latency: figures } as never)).toEqual(timingFree({ ...whole, latency: wholeFigures } as never));
      expect({ ...a, stepEndMs: [], tokenSteps: [] }).toEqual({ ...b, stepEndMs: [], tokenSteps: [] });
    }
    await expect(fleetSweep({ ...base, grid, perRequest: 1 as never })).rejects.toThrow(/options.perRequest must be a boolean, got 1/);
    // The axes matter: a faster arrival rate queues more.
    const ttft = (s: string, sp: number, e: number) => runs.find((r) => r.config.scheduler === s && r.config.speedup === sp && r.config.engines === e)!.latency!.ttftMs.p99;
    expect(ttft('continuous', 0.05, 1)).toBeGreaterThan(ttft('continuous', 0.02, 1));
  });

  it('refuses a TimingModel object (it cannot cross to a worker thread) and names a wrong configuration', async () => {
    await expect(fleetSweep({ ...base, timing: timingModel(), grid: { engines: [1] } })).rejects.toThrow(/cannot take a TimingModel object/);
    await expect(fleetSweep({ requests: 10, grid: { speedup: [2], engines: [1] } })).rejects.toThrow(/configuration 1 of 1 \(speedup=2 engines=1 router=round-robin\): options.speedup applies to a timed fleet/);
  });
});

describe('meetsSlo', () => {
  it('holds a fleet that did not serve every request in full to have missed the SLO', () => {
    const small = fleetSync({ requests: 60, maxRunning: 4, numBlocks: 250, engines: 1, timing: true });
    const lost = small.rejected + small.truncated + small.engines.reduce((a, e) => a + e.finishedEarly, 0);
    expect(lost).toBeGreaterThan(0);
    expect(meetsSlo(small, { ttftMs: small.latency!.ttftMs.p99 + 1e9 })).toBe(false);
    const big = fleetSync({ requests: 60, maxRunning: 4, numBlocks: 4800, engines: 1, timing: true });
    expect(meetsSlo(big, { ttftMs: big.latency!.ttftMs.p99 })).toBe(true);
    expect(meetsSlo(big, { ttftMs: big.latency!.ttftMs.p99 - 1e-3 })).toBe(false);
    expect(() => meetsSlo(fleetSync({ requests: 10, engines: 1 }), { ttftMs: 1 })).toThrow(/needs a timed fleet run/);
  });
});

describe('kvpool sweep, timed', () => {
  const ARGS = ['sweep', '--requests', '150', '--max-running', '4', '--num-blocks', '1200,4800', '--scheduler', 'continuous', '--speedup', '0.01,0.02', '--engines', '1,2,3,4', '--router', 'least-loaded', '--workers', '2'];

  /** The brute force: per speed-up, the fleets that served every request in full within the target, the fewest engines then fewest blocks first. */
  function bruteForce(runs: readonly Json[], ttftMs: number): Map<number, Json | null> {
    const out = new Map<number, Json | null>();
    for (const sp of new Set(runs.map((r) => r.config.speedup))) {
      const ok = runs
        .filter((r) => r.config.speedup === sp && r.rejected === 0 && r.truncated === 0 && r.engines.every((e) => e.finishedEarly === 0) && r.latency.ttftMs.p99 <= ttftMs)
        .sort((a, b) => a.config.engines - b.config.engines || a.config.numBlocks - b.config.numBlocks);
      out.set(sp, ok[0] ?? null);
    }
    return out;
  }

  it('--slo-ttft-ms: per router and speed-up, the smallest fleet meeting it, as a brute force over the runs finds it', async () => {
    const all = JSON.parse((await capture(() => main([...ARGS, '--format', 'json']))).out) as Json[];
    expect(all.length).toBe(16);
    // A target between the figures, so that the answer is neither the smallest fleet nor none for every group.
    const p99s = [...new Set(all.map((r) => r.latency.ttftMs.p99))].sort((a, b) => a - b);
    const target = Math.round(p99s[Math.floor(p99s.length / 3)]!);
    const expected = bruteForce(all, target);
    expect([...expected.values()].some((r) => r !== null && r.config.engines > 1)).toBe(true);
    const r = await capture(() => main([...ARGS, '--format', 'json', '--slo-ttft-ms', String(target)]));
    expect(r.code).toBe(0);
    const { slo, runs } = JSON.parse(r.out) as { slo: { ttftMs: number; percentile: number; answers: Answer[] }; runs: Json[] };
    expect(runs).toEqual(all);
    expect(slo.ttftMs).toBe(target);
    expect(slo.percentile).toBe(99);
    expect(slo.answers.map((a) => a.label)).toEqual(['least-loaded, speedup 0.01', 'least-loaded, speedup 0.02']);
    for (const a of slo.answers) {
      const want = expected.get(Number(a.label.split(' ').at(-1)))!;
      expect({ engines: a.engines, numBlocks: a.numBlocks, ttftMsP99: a.ttftMsP99 }, a.label).toEqual(
        want === null ? { engines: null, numBlocks: null, ttftMsP99: null } : { engines: want.config.engines, numBlocks: want.config.numBlocks, ttftMsP99: want.latency.ttftMs.p99 },
      );
    }
    // The table says the same in words, after the rows, which carry the latency columns.
    const t = await capture(() => main([...ARGS, '--slo-ttft-ms', String(target)]));
    const lines = t.out.trimEnd().split('\n');
    expect(lines[1]).toMatch(/queue mean \(steps\)\s+queue p99 \(steps\)\s+imbalance\s+rejected\s+TTFT p99 ms\s+TPOT p99 ms\s+ITL p99 ms\s+E2E p99 ms\s+output tok\/s$/);
    for (const a of slo.answers) {
      const line = lines.find((l) => l.startsWith(`${a.label}: `))!;
      expect(line).toContain(a.engines === null ? `no fleet tried meets p99 TTFT <= ${target} ms` : `smallest fleet meeting p99 TTFT <= ${target} ms: ${a.engines} engine`);
    }
    // A target no fleet meets: none, with the largest fleet's figures.
    const none = JSON.parse((await capture(() => main([...ARGS, '--format', 'json', '--slo-ttft-ms', '1']))).out) as { slo: { answers: Answer[] } };
    expect(none.slo.answers.every((a) => a.engines === null && a.numBlocks === null)).toBe(true);
  });

  it('--slo-tpot-ms: the smallest fleet whose p99 time per output token meets it, with its figure in the JSON', async () => {
    const all = JSON.parse((await capture(() => main([...ARGS, '--format', 'json']))).out) as Array<Json & { latency: { tpotMs: { p99: number } } }>;
    const p99s = [...new Set(all.map((r) => r.latency.tpotMs.p99))].sort((a, b) => a - b);
    const target = p99s[Math.floor(p99s.length / 2)]!;
    const r = await capture(() => main([...ARGS, '--format', 'json', '--slo-tpot-ms', String(target)]));
    expect(r.code).toBe(0);
    const { slo } = JSON.parse(r.out) as { slo: { tpotMs: number; answers: Array<Answer & { tpotMsP99: number | null }> } };
    expect(slo.tpotMs).toBe(target);
    for (const a of slo.answers) {
      const group = all.filter((x) => `${x.config.router}, speedup ${x.config.speedup}` === a.label);
      const met = group.filter((x) => x.rejected + x.truncated === 0 && x.engines.every((e) => e.finishedEarly === 0) && x.latency.tpotMs.p99 <= target);
      const best = met.sort((x, y) => x.config.engines - y.config.engines || x.config.numBlocks - y.config.numBlocks)[0] ?? null;
      expect({ engines: a.engines, numBlocks: a.numBlocks, tpotMsP99: a.tpotMsP99 }, a.label).toEqual(
        best === null ? { engines: null, numBlocks: null, tpotMsP99: null } : { engines: best.config.engines, numBlocks: best.config.numBlocks, tpotMsP99: best.latency.tpotMs.p99 },
      );
    }
    const refused = await capture(() => main(['sweep', '--requests', '20', '--engines', '1,2', '--slo-tpot-ms', '100']));
    expect(refused.err).toMatch(/--slo-tpot-ms needs a timed fleet/);
  });

  it('--report: latency charts whose bars are the table\'s values, with the SLO as one dashed line per panel', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvpool-timed-report-'));
    const html = join(dir, 'timed.html');
    const r = await capture(() => main([...ARGS, '--slo-ttft-ms', '20000', '--report', html, '--format', 'csv']));
    expect(r.code).toBe(0);
    expect(r.err).toMatch(/kvpool: least-loaded, speedup 0.01: /);
    const text = readFileSync(html, 'utf8');
    const section = (id: string) => text.slice(text.indexOf(`<section id="${id}">`), text.indexOf('</section>', text.indexOf(`<section id="${id}">`)));
    const rows = [...section('results').matchAll(/<tr><td.*?<\/tr>/g)].map((m) => Object.fromEntries([...m[0].matchAll(/data-key="(\w+)" data-value="([^"]*)"/g)].map((x) => [x[1]!, x[2]!])));
    expect(rows.length).toBe(16);
    for (const [id, title, key] of [['ttft-p99', 'p99 TTFT (ms)', 'ttftP99'], ['itl-p99', 'p99 ITL (ms)', 'itlP99'], ['output-throughput', 'output tokens/s', 'outputTokensPerSecond']] as const) {
      const bars = [...section(id).matchAll(/aria-label="([^"]*)" role="graphics-symbol" aria-roledescription="bar"/g)].map((m) => Object.fromEntries(m[1]!.split('; ').map((kv) => kv.split(': '))));
      expect(bars.length, id).toBe(16);
      // Panels are drawn in the table's order, and within a panel the bars too (a bar's label does not name its panel).
      for (const [i, b] of bars.entries()) {
        expect(b['engines'], `${id} bar ${i}`).toBe(rows[i]!['engines']);
        // One decimal as the chart prints it (its rounding of a half may differ from toFixed's by the last digit).
        expect(Math.abs(Number(b[title]!.replace(/,/g, '')) - Number(rows[i]![key])), `${id} ${JSON.stringify(b)}`).toBeLessThanOrEqual(0.05 + 1e-6);
      }
    }
    // Four panels (num-blocks x speedup): the TTFT target drawn once in each, the ITL chart without a target has none.
    const dashed = (id: string) => [...section(id).matchAll(/stroke="#c0392b" stroke-width="2" stroke-dasharray="6,4"/g)].length;
    expect(dashed('ttft-p99')).toBe(4);
    expect(dashed('itl-p99')).toBe(0);
    expect(section('answers')).toContain('Smallest fleet meeting p99 TTFT &lt;= 20000 ms');
    expect([...section('answers').matchAll(/<li>/g)].length).toBe(2);
  });

  it('--report: an answer no fleet can meet gives the reason, as the printed line does', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvpool-timed-report-'));
    const html = join(dir, 'unmeetable.html');
    const small = ['sweep', '--requests', '60', '--max-running', '4', '--num-blocks', '3000', '--scheduler', 'continuous', '--speedup', '40', '--engines', '1,2', '--workers', '2', '--no-progress'];
    const r = await capture(() => main([...small, '--slo-ttft-ms', '50', '--report', html]));
    expect(r.code).toBe(0);
    const line = r.out.split('\n').find((l) => l.startsWith('round-robin: no fleet tried meets'))!;
    expect(line).toMatch(/; no fleet can meet it: under the timing model \(polynomial\), \d+ of the 60 requests take longer than 50 ms/);
    const text = readFileSync(html, 'utf8');
    const answers = text.slice(text.indexOf('<section id="answers">'), text.indexOf('</section>', text.indexOf('<section id="answers">')));
    const items = [...answers.matchAll(/<li>(.*?)<\/li>/g)].map((m) => m[1]!.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&'));
    expect(items).toEqual([line]);
  });

  it('has no latency charts for step-clock fleets, and a mixed sweep draws only the timed bars', async () => {
    const step = await fleetSweep({ requests: 40, maxRunning: 4, numBlocks: 2400, grid: { engines: [1, 2] }, workers: 1 });
    expect(fleetReportCharts(step, ['router', 'engines']).map((c) => c.id)).not.toContain('ttft-p99');
    const mixed = await fleetSweep({ requests: 40, maxRunning: 4, numBlocks: 2400, grid: { scheduler: ['xllm', 'continuous'], engines: [1, 2] }, workers: 1 });
    expect(mixed.filter((r) => r.latency !== undefined).length).toBe(2);
    const ttft = fleetReportCharts(mixed, ['scheduler', 'router', 'engines']).find((c) => c.id === 'ttft-p99')!;
    const values = (ttft.spec!['data'] as { values: Array<{ ttftP99: number | null }> }).values;
    expect(values.filter((v) => v.ttftP99 !== null).length).toBe(2);
  });

  it('refuses an SLO for fleets on the step clock, and SLO targets that are not positive', async () => {
    const step = await capture(() => main(['sweep', '--requests', '20', '--engines', '1,2', '--slo-ttft-ms', '100']));
    expect(step.code).toBe(1);
    expect(step.err).toMatch(/--slo-ttft-ms needs a timed fleet/);
    const mixed = await capture(() => main(['sweep', '--requests', '20', '--scheduler', 'xllm,continuous', '--slo-itl-ms', '100']));
    expect(mixed.code).toBe(1);
    expect(mixed.err).toMatch(/--slo-itl-ms needs a timed fleet/);
    const bad = await capture(() => main(['sweep', '--requests', '20', '--timing', 'default', '--slo-ttft-ms', '0']));
    expect(bad.code).toBe(1);
    expect(bad.err).toMatch(/--slo-ttft-ms/);
    const sched = await capture(() => main(['sweep', '--requests', '20', '--scheduler', 'fifo']));
    expect(sched.code).toBe(1);
    expect(sched.err).toMatch(/--scheduler must be among xllm, continuous, got "fifo"/);
  });
});
