// The engine as a sweep axis (docs/sweep.md, engines): `fleetSweep` with
// grid.engine gives exactly fleet()'s run of each engine at every point;
// `kvpool sweep --engine xllm,vllm` has an engine column, draws a panel per
// engine in its report and answers an SLO per engine; vLLM's names are
// taken as lists; what one engine does not take is refused by flag.

import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import { fleetSync } from '../bindings/fleet/fleet.js';
import type { FleetRun } from '../bindings/fleet/fleet-result.js';
import { fleetSweep, fleetSweepConfigurations } from '../bindings/node/fleet-sweep.js';
import { capture } from './support/capture.js';

const timingFree = (r: FleetRun) => ({ ...r, engines: r.engines.map((e) => ({ ...e, run: { ...e.run, seconds: 0, allocateCallsPerSecond: 0 } })) });

describe('fleetSweep() with the engine as an axis', () => {
  it('varies the engine after the replay options, before the timed axes, fleet size and router; each point is fleet()\'s run', async () => {
    const base = { requests: 80, maxRunning: 4, numBlocks: 3000, timing: true as const };
    const grid = { numBlocks: [1500, 3000], engine: ['xllm', 'vllm'] as const, speedup: [0.05], engines: [1, 2] };
    const configs = fleetSweepConfigurations(base, grid);
    expect(configs.map((c) => `${c.numBlocks}/${c.engine}/${c.engines}`)).toEqual([
      '1500/xllm/1', '1500/xllm/2', '1500/vllm/1', '1500/vllm/2', '3000/xllm/1', '3000/xllm/2', '3000/vllm/1', '3000/vllm/2',
    ]);
    const runs = await fleetSweep({ ...base, grid, workers: 2, perRequest: true });
    for (const [i, c] of configs.entries()) expect(timingFree(runs[i]!), `configuration ${i}`).toEqual(timingFree(fleetSync(c)));
    expect(runs.map((r) => r.config.engine ?? 'xllm')).toEqual(configs.map((c) => c.engine));
    expect(runs.filter((r) => r.latency!.scheduler === 'vllm')).toHaveLength(4);
    // A configuration that one engine refuses is named before anything runs.
    await expect(fleetSweep({ requests: 10, eviction: 'lfu', grid: { engine: ['xllm', 'vllm'], engines: [1] } })).rejects.toThrow(
      /configuration 2 of 2 \(engine=vllm engines=1 router=round-robin\): options.eviction cannot be used with engine 'vllm'/,
    );
  });
});

describe('kvpool sweep --engine', () => {
  const ARGS = ['sweep', '--requests', '100', '--engine', 'xllm,vllm', '--engines', '1,2', '--router', 'least-loaded', '--num-gpu-blocks-override', '2400', '--max-num-seqs', '8', '--timing', 'default', '--speedup', '0.05', '--no-progress'];

  it('an engine column, vLLM\'s names as lists, exactly fleet()\'s figures', async () => {
    const r = await capture(() => main([...ARGS, '--format', 'json']));
    const runs = JSON.parse(r.out) as Array<{ config: Record<string, unknown>; hitRate: number; finishedEarly: number; latency: { ttftMs: { p99: number } } }>;
    // The only warnings: the xllm fleets' requests the kernel finished early to make room (the vllm engine finishes none early but by truncating).
    const early = runs.flatMap((x, i) => (x.config['engine'] === undefined && x.finishedEarly > 0 ? [`${x.finishedEarly} requests stopped decoding early: an engine's pool ran out of blocks and the kernel finished them while they still decoded, to make room (counted as finished early; more blocks or fewer running requests avoid it: numBlocks or maxRunning, --num-blocks or --max-running) (fleet ${i + 1})`] : []));
    expect(r.err).toBe(early.map((w) => `kvpool: warning: ${w}\n`).join(''));
    expect(runs.map((x) => `${String(x.config['engine'] ?? 'xllm')}/${String(x.config['engines'])}`)).toEqual(['xllm/1', 'xllm/2', 'vllm/1', 'vllm/2']);
    expect(runs.every((x) => x.config['numBlocks'] === 2400 && x.config['maxRunning'] === 8)).toBe(true);
    expect(runs[0]!.config).toHaveProperty('eviction', 'lru');
    expect(runs[2]!.config).not.toHaveProperty('eviction');
    const lib = fleetSync({ requests: 100, engine: 'vllm', engines: 2, router: 'least-loaded', numBlocks: 2400, maxRunning: 8, timing: true, speedup: 0.05 });
    expect(runs[3]!.hitRate).toBe(lib.hitRate);
    expect(runs[3]!.latency.ttftMs.p99).toBe(lib.latency!.ttftMs.p99);
    const t = await capture(() => main(ARGS));
    const lines = t.out.trimEnd().split('\n');
    expect(lines[1]).toMatch(/^\s*engine\s+router\s+engines\s+hit rate/);
    expect(lines.slice(2, 6).map((l) => l.trim().split(/\s+/)[0])).toEqual(['xllm', 'xllm', 'vllm', 'vllm']);
  });

  it('answers an SLO per engine and draws a panel per engine', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvpool-engine-sweep-'));
    const html = join(dir, 'engines.html');
    const r = await capture(() => main([...ARGS, '--slo-ttft-ms', '100000', '--report', html, '--format', 'json']));
    expect(r.code).toBe(0);
    const { slo } = JSON.parse(r.out) as { slo: { answers: Array<{ label: string; engines: number | null }> } };
    expect(slo.answers.map((a) => a.label)).toEqual(['least-loaded, engine xllm', 'least-loaded, engine vllm']);
    // 2,400 blocks are too few for the xllm kernel to serve every request in full (it finishes some early); the vLLM engine preempts instead.
    expect(slo.answers.map((a) => a.engines)).toEqual([null, 1]);
    const text = readFileSync(html, 'utf8');
    const section = (id: string) => text.slice(text.indexOf(`<section id="${id}">`), text.indexOf('</section>', text.indexOf(`<section id="${id}">`)));
    expect(section('fleet-hit-rate')).toContain('engine xllm');
    expect(section('fleet-hit-rate')).toContain('engine vllm');
    const rows = [...section('results').matchAll(/data-key="engine" data-value="(\w+)"/g)].map((m) => m[1]);
    expect(rows).toEqual(['xllm', 'xllm', 'vllm', 'vllm']);
  });

  it('--help says how to choose the engine', async () => {
    const r = await capture(() => main(['sweep', '--help']));
    for (const flag of ['--engine <list>', '--max-num-seqs <list>', '--num-gpu-blocks-override <list>', '--long-prefill-token-threshold <n>', '--no-scheduler-reserve-full-isl']) expect(r.out).toContain(flag);
    expect(r.out).toMatch(/Choose vllm to plan\s+a vLLM fleet/);
    const top = await capture(() => main(['--help']));
    expect(top.out).toMatch(/kvpool sweep --engine xllm,vllm compares the two/);
  });

  it('refuses what one of the engines does not take, by flag, before anything runs', async () => {
    const bad: Array<[string[], RegExp]> = [
      [['--engine', 'xllm,vllm', '--eviction', 'lru,lfu'], /^kvpool: --eviction cannot be used with --engine vllm: vLLM has one eviction order/],
      [['--engine', 'vllm', '--host-blocks', '100'], /^kvpool: --host-blocks cannot be used with --engine vllm/],
      [['--engine', 'xllm,vllm', '--long-prefill-token-threshold', '64'], /^kvpool: --long-prefill-token-threshold needs --engine vllm/],
      [['--long-prefill-token-threshold', '64'], /^kvpool: --long-prefill-token-threshold needs --engine vllm/],
      [['--engine', 'vlm'], /--engine must be among xllm, vllm, got "vlm"/],
      [['--engine', 'vllm', '--max-running', '4,8', '--max-num-seqs', '4'], /^kvpool: --max-running 4,8 and --max-num-seqs 4 are one option/],
      [['--engine', 'vllm', '--scheduler', 'continuous'], /configuration 1 .*--scheduler continuous cannot be used with --engine vllm/],
    ];
    for (const [args, msg] of bad) {
      const r = await capture(() => main(['sweep', '--requests', '10', '--no-progress', ...args]));
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.err, args.join(' ')).toMatch(msg);
    }
    // The vllm engine's switches on its own fleets.
    const ok = await capture(() => main(['sweep', '--requests', '30', '--no-progress', '--engine', 'vllm', '--engines', '1', '--long-prefill-token-threshold', '64', '--no-scheduler-reserve-full-isl', '--max-num-batched-tokens', '256,512', '--format', 'json']));
    expect(ok.err).toBe('');
    expect((JSON.parse(ok.out) as Array<{ config: Record<string, unknown> }>).map((x) => [x.config['maxNumBatchedTokens'], x.config['longPrefillTokenThreshold'], x.config['schedulerReserveFullIsl']])).toEqual([[256, 64, false], [512, 64, false]]);
  });
});
