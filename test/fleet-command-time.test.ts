// `kvpool fleet` on the millisecond clock as a user meets it: each timed
// flag reaches fleet() as the option of the same name (the JSON equals the
// library's run), --per-request keeps each request's times, the step clock
// is what it was without them, --slo-ttft-ms answers what a brute force over
// the engine counts answers, and what cannot be timed is refused up front.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import { fleetSync } from '../bindings/fleet/fleet.js';
import type { FleetOptions } from '../bindings/fleet/fleet-options.js';
import type { FleetRun } from '../bindings/fleet/fleet-result.js';
import { meetsSlo } from '../bindings/fleet/slo-search.js';
import { capture } from './support/capture.js';

/** The run as `--json` gives it: engines without their replay result, latency without per-request times. */
const asJson = (r: FleetRun, perRequest = false) => {
  const engines = r.engines.map(({ run: _run, ...e }) => e);
  if (r.latency === undefined) return { ...r, engines };
  const { requests, ...latency } = r.latency;
  return JSON.parse(JSON.stringify({ ...r, engines, latency: perRequest ? { ...latency, requests } : latency }));
};

const base = { requests: 160, engines: 2, maxRunning: 4, numBlocks: 3000 } as const;
const baseArgs = ['fleet', '--requests', '160', '--engines', '2', '--max-running', '4', '--num-blocks', '3000', '--no-progress'];

async function fleetJsonOf(args: readonly string[]): Promise<{ code: number; obj: ReturnType<typeof asJson> }> {
  const r = await capture(() => main([...baseArgs, ...args, '--json']));
  return { code: r.code, obj: r.code === 0 ? JSON.parse(r.out) : undefined };
}

describe('kvpool fleet --timing', () => {
  it('--timing default gives fleet()\'s timed run, latency and all', async () => {
    const { code, obj } = await fleetJsonOf(['--timing', 'default']);
    expect(code).toBe(0);
    const lib = fleetSync({ ...base, timing: true });
    expect(obj).toEqual(asJson(lib));
    expect(obj.config).toMatchObject({ timing: 'polynomial', scheduler: 'xllm', speedup: 1, concurrency: 0 });
    expect(obj.latency.completed).toBe(160);
    expect(obj.latency.requests).toBeUndefined();
  });

  it('--per-request keeps each request\'s arrival, first token and finish', async () => {
    const { obj } = await fleetJsonOf(['--timing', 'default', '--per-request']);
    const lib = fleetSync({ ...base, timing: true });
    expect(obj).toEqual(asJson(lib, true));
    const times = obj.latency.requests;
    expect(times.arrivalMs.length).toBe(160);
    for (let i = 0; i < 160; i++) expect(times.firstTokenMs[i]).toBeGreaterThanOrEqual(times.arrivalMs[i]);
  });

  it('--scheduler, --max-num-batched-tokens, --speedup and --concurrency each reach fleet()', async () => {
    const cases: Array<[string[], FleetOptions]> = [
      [['--scheduler', 'continuous'], { scheduler: 'continuous' }],
      [['--scheduler', 'continuous', '--max-num-batched-tokens', '256'], { scheduler: 'continuous', maxNumBatchedTokens: 256 }],
      [['--timing', 'default', '--speedup', '20'], { timing: true, speedup: 20 }],
      [['--scheduler', 'continuous', '--concurrency', '3'], { scheduler: 'continuous', concurrency: 3 }],
    ];
    const seen: ReturnType<typeof asJson>[] = [];
    for (const [args, options] of cases) {
      const { code, obj } = await fleetJsonOf(args);
      expect(code, args.join(' ')).toBe(0);
      expect(obj, args.join(' ')).toEqual(asJson(fleetSync({ ...base, ...options })));
      seen.push(obj);
    }
    // Each flag changes the run: a tighter budget, a faster arrival, a closed loop.
    expect(new Set(seen.map((o) => JSON.stringify(o.latency))).size).toBe(cases.length);
    expect(seen[1].config.maxNumBatchedTokens).toBe(256);
  });

  it('reads a profiled table (.csv) and says which one: its file and a hash of its points', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvpool-timing-'));
    const file = join(dir, 'gpu.csv');
    writeFileSync(file, 'phase,x,ms\nprefill,128,12.5\nprefill,2048,131\ndecode,1,7.1\ndecode,32,9.8\n');
    const { code, obj } = await fleetJsonOf(['--timing', file]);
    expect(code).toBe(0);
    expect(obj.config.timing).toMatch(/^table gpu\.csv sha256:[0-9a-f]{12}$/);
    expect(obj.latency.timing).toBe(obj.config.timing);
    expect(obj.latency.ttftMs).not.toEqual(fleetSync({ ...base, timing: true }).latency!.ttftMs);
  });

  it('without a timed flag, the step clock is what it was: no latency, the same figures', async () => {
    const { obj } = await fleetJsonOf([]);
    expect(obj.latency).toBeUndefined();
    expect(obj.config.timing).toBeUndefined();
    expect(obj).toEqual(asJson(fleetSync(base)));
  });

  it('prints the latency block in the table', async () => {
    const r = await capture(() => main([...baseArgs, '--timing', 'default']));
    expect(r.code).toBe(0);
    const l = fleetSync({ ...base, timing: true }).latency!;
    expect(r.out).toMatch(/timing polynomial · scheduler xllm/);
    expect(r.out).toMatch(/latency \(ms\)\s+mean\s+p50\s+p90\s+p95\s+p99\s+max\s+over\n/);
    const one = (x: number) => x.toLocaleString('en-US', { minimumFractionDigits: 1, maximumFractionDigits: 1 });
    expect(r.out).toContain(one(l.ttftMs.p99));
    // Each figure's row says what it is over: ITL over the gaps between tokens, the others over requests.
    const row = (label: string, f: typeof l.ttftMs, what: string) =>
      new RegExp(`\\n  ${label}\\s+${[f.mean, f.p50, f.p90, f.p95, f.p99, f.max].map((x) => one(x).replace(/\./g, '\\.')).join('\\s+')}\\s+${f.count.toLocaleString('en-US')} ${what}\\n`);
    expect(r.out).toMatch(row('TTFT', l.ttftMs, 'requests'));
    expect(r.out).toMatch(row('TPOT', l.tpotMs, 'requests'));
    expect(r.out).toMatch(row('ITL ', l.itlMs, 'gaps'));
    expect(r.out).toMatch(row('E2E ', l.e2eMs, 'requests'));
    expect(l.itlMs.count).toBe(l.outputTokens - l.completed);
  });

  it('CSV has a column per field of each figure, TPOT and p95 included', async () => {
    const r = await capture(() => main([...baseArgs, '--timing', 'default', '--format', 'csv']));
    const [head, row] = r.out.trimEnd().split('\n').map((x) => x.split(','));
    const l = fleetSync({ ...base, timing: true }).latency!;
    for (const [key, value] of [['latency.tpotMs.p95', l.tpotMs.p95], ['latency.itlMs.count', l.itlMs.count], ['latency.ttftMs.p95', l.ttftMs.p95], ['latency.originMs', 0]] as const) {
      expect(head, key).toContain(key);
      expect(Number(row![head!.indexOf(key)]), key).toBe(value);
    }
  });
});

describe('kvpool fleet --slo-ttft-ms', () => {
  const slowBase = { requests: 160, maxRunning: 4, numBlocks: 3000, scheduler: 'continuous', speedup: 40 } as const;
  const slowArgs = ['fleet', '--requests', '160', '--max-running', '4', '--num-blocks', '3000', '--scheduler', 'continuous', '--speedup', '40', '--no-progress'];

  it('answers the fewest engines that a brute force over 1..4 finds', async () => {
    const runs = [1, 2, 3, 4].map((engines) => fleetSync({ ...slowBase, engines }));
    const p99 = runs.map((r) => r.latency!.ttftMs.p99);
    // A target between what 1 engine and 4 engines give, so the answer is neither trivial nor none.
    expect(p99[0]).toBeGreaterThan(p99[3]!);
    const target = Math.round((p99[0]! + p99[3]!) / 2);
    const brute = runs.find((r) => meetsSlo(r, { ttftMs: target }));
    expect(brute).toBeDefined();
    const r = await capture(() => main([...slowArgs, '--engines', '4', '--slo-ttft-ms', String(target), '--json']));
    expect(r.code).toBe(0);
    const obj = JSON.parse(r.out);
    expect(obj.slo).toMatchObject({ ttftMs: target, percentile: 99 });
    expect(obj.slo.answers).toEqual([{ label: 'round-robin', router: 'round-robin', engines: brute!.config.engines, maxEngines: brute!.config.engines, ttftMsP99: brute!.latency!.ttftMs.p99, tpotMsP99: brute!.latency!.tpotMs.p99, itlMsP99: brute!.latency!.itlMs.p99 }]);
    // The search stops at the first count that meets the target: the runs are 1..answer, each the library's.
    expect(obj.runs).toEqual(runs.slice(0, brute!.config.engines).map((x) => asJson(x)));
    const table = await capture(() => main([...slowArgs, '--engines', '4', '--slo-ttft-ms', String(target)]));
    expect(table.out).toContain(`fewest engines meeting p99 TTFT <= ${target} ms: ${brute!.config.engines}`);
  });

  it('--slo-tpot-ms holds the p99 time per output token to its target, as a brute force finds it', async () => {
    const runs = [1, 2, 3, 4].map((engines) => fleetSync({ ...slowBase, engines }));
    const p99 = runs.map((r) => r.latency!.tpotMs.p99);
    const target = Math.round(((Math.max(...p99) + Math.min(...p99)) / 2) * 1000) / 1000;
    const brute = runs.find((r) => meetsSlo(r, { tpotMs: target })) ?? null;
    const r = await capture(() => main([...slowArgs, '--engines', '4', '--slo-tpot-ms', String(target), '--json']));
    expect(r.code).toBe(0);
    const obj = JSON.parse(r.out);
    expect(obj.slo).toMatchObject({ tpotMs: target, percentile: 99 });
    expect(obj.slo.answers[0]).toMatchObject({ engines: brute?.config.engines ?? null, tpotMsP99: (brute ?? runs[3]!).latency!.tpotMs.p99 });
    const table = await capture(() => main([...slowArgs, '--engines', '4', '--slo-tpot-ms', String(target), '--slo-ttft-ms', '1e12']));
    expect(table.out).toMatch(new RegExp(`(fewest engines|no fleet up to 4 engines) meet(s|ing) p99 TTFT <= 1000000000000 ms and p99 TPOT <= ${target} ms`));
  });

  it('says so when no fleet tried meets the target', async () => {
    const r = await capture(() => main([...slowArgs, '--engines', '2', '--slo-ttft-ms', '0.001']));
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/no fleet up to 2 engines meets p99 TTFT <= 0.001 ms \(2 engines: p99 TTFT [\d,.]+ ms/);
  });
});

describe('kvpool fleet refuses what cannot be timed, before reading a trace', () => {
  const refused: Array<[string[], RegExp]> = [
    [['--slo-ttft-ms', '500'], /--slo-ttft-ms needs a timed fleet: give --timing default/],
    [['--slo-itl-ms', '50'], /--slo-itl-ms needs a timed fleet/],
    [['--slo-tpot-ms', '50'], /--slo-tpot-ms needs a timed fleet/],
    [['--timing', 'default', '--slo-tpot-ms', '0'], /--slo-tpot-ms/],
    [['--speedup', '2'], /speedup applies to a timed fleet/],
    [['--timing', 'default', '--threads', '2'], /--threads 2: a timed fleet runs in one thread/],
    [['--scheduler', 'continuous', '--zmq', 'tcp://127.0.0.1:1'], /--zmq publishes a fleet on the step clock/],
    [['--timing', '/nonexistent/gpu.csv'], /^kvpool: --timing \/nonexistent\/gpu.csv: no such file\n$/],
    [['--timing', 'gpu.txt'], /--timing "gpu.txt": give default \(the built-in polynomial\) or a .json or .csv file\n/],
    [['--max-num-batched-tokens', '0'], /--max-num-batched-tokens must be >= 1, got 0/],
  ];
  for (const [args, message] of refused) {
    it(args.join(' '), async () => {
      const r = await capture(() => main(['fleet', '/nonexistent.jsonl', ...args]));
      expect(r.code).toBe(1);
      expect(r.err).toMatch(message);
      expect(r.err).not.toMatch(/nonexistent\.jsonl/);
    });
  }
});
