// `kvpool fleet` as a user meets it: the configuration echoed, the same
// figures as `fleet()`, a table with a row per engine, CSV, a glossary in
// --help and in docs/fleet.md, errors before any trace is read.

import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import { FLEET_CONFIG_GLOSSARY, FLEET_ENGINE_GLOSSARY, FLEET_GLOSSARY } from '../bindings/cli/fleet-glossary.js';
import { fleetSync } from '../bindings/fleet/fleet.js';
import { fleet as nodeFleet } from '../bindings/node/fleet-file.js';
import type { FleetRun } from '../bindings/fleet/fleet-result.js';
import { capture } from './support/capture.js';

const root = new URL('..', import.meta.url);
const withoutRuns = (r: FleetRun) => ({ ...r, engines: r.engines.map(({ run: _run, ...e }) => e) });

describe('kvpool fleet', () => {
  it('--json echoes the configuration and gives fleet()\'s figures', async () => {
    const r = await capture(() => main(['fleet', 'mooncake-conversation', '--limit', '300', '--engines', '3', '--router', 'least-loaded', '--step-ms', '40', '--num-blocks', '20000', '--json']));
    expect(r.code).toBe(0);
    const obj = JSON.parse(r.out);
    expect(obj.config).toEqual({
      trace: 'mooncake-conversation', requests: null, limit: 300, blockSize: 16, numBlocks: 20000, dpSize: 1, maxRunning: 32, seed: 1024,
      publishAfterPrefill: false, eviction: 'lru', hostBlocks: 0, storeBlocks: null, slidingWindow: null, compressRatios: null, linearStateSlots: null,
      engines: 3, router: 'least-loaded', stepMs: 40, arrival: 'timestamps', prefixWeight: 1, loadWeight: 1, affinityBlocks: 1,
    });
    const lib = await nodeFleet({ trace: 'mooncake-conversation', limit: 300, engines: 3, router: 'least-loaded', stepMs: 40, numBlocks: 20000 });
    expect(obj).toEqual(withoutRuns(lib));
    expect(obj.engines.map((e: { requests: number }) => e.requests).reduce((a: number, b: number) => a + b)).toBe(300);
  });

  it('--threads gives the same JSON, the trace named as given', async () => {
    const args = ['fleet', 'mooncake-conversation', '--limit', '150', '--engines', '3', '--router', 'precise-prefix', '--num-blocks', '8000', '--json'];
    const here = await capture(() => main(args));
    const there = await capture(() => main([...args, '--threads', '2']));
    expect(there.code).toBe(0);
    expect(JSON.parse(there.out).config.trace).toBe('mooncake-conversation');
    expect(JSON.parse(there.out)).toEqual(JSON.parse(here.out));
  });

  it('the table shows the fleet figures, the hit rate in percent, and one row per engine', async () => {
    const r = await capture(() => main(['fleet', '--requests', '200', '--engines', '2', '--router', 'approximate-prefix', '--arrival', 'instant']));
    expect(r.code).toBe(0);
    const run = fleetSync({ requests: 200, engines: 2, router: 'approximate-prefix', arrival: 'instant' });
    expect(run.hitRate).toBeGreaterThan(0);
    expect(r.out).toMatch(/engines 2 · router approximate-prefix · step ms 20 · arrival instant/);
    expect(r.out).toMatch(new RegExp(`hit rate\\s+${(run.hitRate * 100).toFixed(2)} %`));
    expect(r.out).toMatch(/engine\s+requests\s+rejected\s+hit rate\s+matched\s+evicted\s+id checksum\s+finished early/);
    for (const e of run.engines) expect(r.out).toContain(e.idChecksum.toLocaleString('en-US'));
  });

  it('--format csv has config.* columns, the fleet columns and the figures', async () => {
    const r = await capture(() => main(['fleet', '--requests', '60', '--engines', '2', '--router', 'session-affinity', '--format', 'csv']));
    const [header, row, ...rest] = r.out.trimEnd().split('\n');
    expect(rest).toEqual([]);
    const cols = header!.split(',');
    const at = (k: string) => row!.split(',')[cols.indexOf(k)];
    const run = fleetSync({ requests: 60, engines: 2, router: 'session-affinity' });
    expect(at('config.router')).toBe('session-affinity');
    expect(at('config.engines')).toBe('2');
    expect(Number(at('hitRate'))).toBe(run.hitRate);
    expect(Number(at('queueing.p99Steps'))).toBe(run.queueing.p99Steps);
    expect(Number(at('loadImbalance'))).toBe(run.loadImbalance);
  });

  it('--help explains every field; docs/fleet.md too', async () => {
    const r = await capture(() => main(['fleet', '--help']));
    expect(r.code).toBe(0);
    for (const e of [...FLEET_GLOSSARY, ...FLEET_ENGINE_GLOSSARY]) expect(r.out).toContain(`${e.key} `);
    for (const flag of ['--engines <list>', '--router <list>', '--step-ms <ms>', '--num-blocks <n>', '--eviction <policy>']) expect(r.out).toContain(flag);
    const doc = readFileSync(new URL('docs/fleet.md', root), 'utf8');
    for (const e of [...FLEET_GLOSSARY, ...FLEET_ENGINE_GLOSSARY, ...FLEET_CONFIG_GLOSSARY]) expect(doc, e.key).toContain(`\`${e.key.split(/[.\]]/).pop()}\``);
  });

  it('--router and --engines take lists: every combination runs, engines varying slowest', async () => {
    const r = await capture(() => main(['fleet', '--requests', '120', '--engines', '2,3', '--router', 'round-robin,approximate-prefix', '--json']));
    expect(r.code).toBe(0);
    const runs = JSON.parse(r.out) as FleetRun[];
    expect(runs.map((x) => [x.config.engines, x.config.router])).toEqual([[2, 'round-robin'], [2, 'approximate-prefix'], [3, 'round-robin'], [3, 'approximate-prefix']]);
    expect(runs[3]).toEqual(withoutRuns(fleetSync({ requests: 120, engines: 3, router: 'approximate-prefix' })));
    const table = await capture(() => main(['fleet', '--requests', '120', '--engines', '2,3', '--router', 'round-robin,approximate-prefix']));
    expect(table.out).toMatch(/4 fleets/);
    expect(table.out).toMatch(/\n  approximate-prefix\s+3\s+0\s/);
    const zmq = await capture(() => main(['fleet', '--router', 'round-robin,least-loaded', '--zmq', 'tcp://127.0.0.1:1']));
    expect(zmq.code).toBe(1);
    expect(zmq.err).toMatch(/--zmq publishes one fleet/);
    const wild = await capture(() => main(['fleet', '--requests', '20', '--zmq', 'tcp://*:5557', '--zmq-ranks', 'topic']));
    expect(wild.code).toBe(1);
    expect(wild.err).toMatch(/--zmq-ranks topic: every engine connects to tcp:\/\/\*:5557; give the address of the router's bound socket/);
  });

  it('rejects bad options before reading a trace', async () => {
    const bad = await capture(() => main(['fleet', '/nonexistent.jsonl', '--engines', '0']));
    expect(bad.code).toBe(1);
    expect(bad.err).toMatch(/--engines must be >= 1, got 0/);
    const router = await capture(() => main(['fleet', '/nonexistent.jsonl', '--router', 'random']));
    expect(router.code).toBe(1);
    expect(router.err).toMatch(/--router must be among round-robin, least-loaded, session-affinity, approximate-prefix, precise-prefix, got "random"/);
    const mode = await capture(() => main(['fleet', '/nonexistent.jsonl', '--sliding-window', '64', '--host-blocks', '100']));
    expect(mode.code).toBe(1);
    expect(mode.err).toMatch(/--host-blocks cannot be combined with --sliding-window/);
  });
});

describe('requests finished early count in the fleet\'s summary, with a warning', () => {
  // Six requests of 100 prompt and 200 output tokens, all at once, on two engines of 30 blocks: a pool holds one
  // request's 19 blocks with room to spare, not two, so the kernel finishes the older to make room; none is truncated.
  const trace = Array.from({ length: 6 }, (_, i) => JSON.stringify({ timestamp: i * 10, input_length: 100, output_length: 200, hash_ids: [i] })).join('\n') + '\n';
  const file = join(mkdtempSync(join(tmpdir(), 'kvpool-early-')), 'early.jsonl');
  writeFileSync(file, trace);
  const args = ['fleet', file, '--engines', '2', '--num-blocks', '30', '--max-running', '4', '--arrival', 'instant'];

  it('the library: the sum of the engines\' figure, said in a warning; truncated stays 0', async () => {
    const run = await nodeFleet({ trace: file, engines: 2, numBlocks: 30, maxRunning: 4, arrival: 'instant' });
    expect(run.truncated).toBe(0);
    expect(run.finishedEarly).toBe(run.engines.reduce((a, e) => a + e.finishedEarly, 0));
    expect(run.finishedEarly).toBeGreaterThan(0);
    expect(run.warnings).toContain(
      `${run.finishedEarly} requests stopped decoding early: an engine's pool ran out of blocks and the kernel finished them while they still decoded, to make room ` +
        '(counted as finished early; more blocks or fewer running requests avoid it: numBlocks or maxRunning, --num-blocks or --max-running)',
    );
    // Enough blocks: none finished early, no warning.
    const roomy = await nodeFleet({ trace: file, engines: 2, numBlocks: 60, maxRunning: 4, arrival: 'instant' });
    expect(roomy.finishedEarly).toBe(0);
    expect(roomy.warnings.filter((w) => w.includes('decoding early'))).toEqual([]);
  });

  it('the table, JSON and CSV carry it; the warning goes to stderr', async () => {
    const run = await nodeFleet({ trace: file, engines: 2, numBlocks: 30, maxRunning: 4, arrival: 'instant' });
    const t = await capture(() => main(args));
    expect(t.code).toBe(0);
    expect(t.out).toMatch(new RegExp(`\\n  truncated\\s+0\\n  finished early\\s+${run.finishedEarly}\\n`));
    expect(t.err).toContain(`kvpool: warning: ${run.finishedEarly} requests stopped decoding early: an engine's pool ran out of blocks`);
    expect(JSON.parse((await capture(() => main([...args, '--json']))).out).finishedEarly).toBe(run.finishedEarly);
    const [header, row] = (await capture(() => main([...args, '--format', 'csv']))).out.split('\n');
    expect(row!.split(',')[header!.split(',').indexOf('finishedEarly')]).toBe(String(run.finishedEarly));
  });

  it('continuous and vllm count the truncated requests as finished early: the same figure, one warning', async () => {
    for (const o of [{ scheduler: 'continuous' as const }, { engine: 'vllm' as const, timing: true as const }]) {
      const run = await nodeFleet({ trace: file, engines: 1, numBlocks: 16, maxRunning: 4, ...o });
      expect(run.truncated).toBeGreaterThan(0);
      expect(run.finishedEarly).toBe(run.truncated);
      expect(run.warnings.filter((w) => w.includes('decoding early'))).toEqual([`${run.truncated} requests stopped decoding early for lack of blocks (counted as truncated)`]);
    }
  });
});
