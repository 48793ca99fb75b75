// `kvpool fleet --engine vllm` as a user meets it: fleet()'s figures with
// the engine's options echoed, vLLM's flag names, the refusals of what the
// vllm engine does not model (in the command line's words, before a trace
// is read), the table and CSV with the engine's options, and --help saying
// how to choose the engine.

import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KVEventIndex } from '../bindings/events/kv-event-index.js';
import { decodeVllmEventBatches } from '../bindings/events/vllm-decode.js';
import { engineEventFile } from '../bindings/cli/fleet-publish.js';
import { fleetSync } from '../bindings/fleet/fleet.js';
import { describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import { FLEET_VLLM_CONFIG_GLOSSARY } from '../bindings/cli/fleet-glossary.js';
import type { FleetRun } from '../bindings/fleet/fleet-result.js';
import { fleet as nodeFleet } from '../bindings/node/fleet-file.js';
import { capture } from './support/capture.js';

const root = new URL('..', import.meta.url);
const withoutRuns = (r: FleetRun) => ({ ...r, engines: r.engines.map(({ run: _run, ...e }) => e) });

describe('kvpool fleet --engine vllm', () => {
  it("--json gives fleet()'s figures under vLLM's flag names, the engine's options echoed", async () => {
    const r = await capture(() => main([
      'fleet', 'mooncake-conversation', '--limit', '200', '--engine', 'vllm', '--engines', '2', '--router', 'precise-prefix',
      '--num-gpu-blocks-override', '8000', '--max-num-seqs', '16', '--max-num-batched-tokens', '2048', '--long-prefill-token-threshold', '512', '--no-scheduler-reserve-full-isl', '--json',
    ]));
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    const obj = JSON.parse(r.out);
    expect(obj.config).toEqual({
      trace: 'mooncake-conversation', requests: null, limit: 200, blockSize: 16, numBlocks: 8000, dpSize: 1, maxRunning: 16, seed: 1024,
      engine: 'vllm', maxNumBatchedTokens: 2048, longPrefillTokenThreshold: 512, schedulerReserveFullIsl: false,
      engines: 2, router: 'precise-prefix', stepMs: 20, arrival: 'timestamps', prefixWeight: 1, loadWeight: 1, affinityBlocks: 1,
    });
    const lib = await nodeFleet({
      trace: 'mooncake-conversation', limit: 200, engine: 'vllm', engines: 2, router: 'precise-prefix', numBlocks: 8000, maxRunning: 16,
      maxNumBatchedTokens: 2048, longPrefillTokenThreshold: 512, schedulerReserveFullIsl: false,
    });
    expect(obj).toEqual(withoutRuns(lib));
    expect(lib.matchedBlocks).toBeGreaterThan(0);
  });

  it('refuses what the vllm engine does not model, in flags, before reading the trace', async () => {
    const bad: Array<[string[], string]> = [
      [['--eviction', 'lfu'], "--eviction cannot be used with --engine vllm: vLLM has one eviction order, its free queue's (the head goes first); lru, lfu and priority are the xllm engine's"],
      [['--host-blocks', '100'], '--host-blocks cannot be used with --engine vllm: the vllm engine does not model a host tier'],
      [['--sliding-window', '64'], '--sliding-window cannot be used with --engine vllm'],
      [['--publish-after-prefill'], '--publish-after-prefill cannot be used with --engine vllm'],
      [['--threads', '2'], '--threads 2 cannot be used with --engine vllm: a fleet of vLLM engines runs in one thread'],
      [['--scheduler', 'continuous'], '--scheduler continuous cannot be used with --engine vllm'],
      [['--max-running', '8', '--max-num-seqs', '16'], "--max-running 8 and --max-num-seqs 16 are one option (kvpool's name and vLLM's) and disagree"],
    ];
    for (const [args, msg] of bad) {
      const r = await capture(() => main(['fleet', 'no-such-trace.jsonl', '--engine', 'vllm', ...args]));
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.err, args.join(' ')).toContain(msg);
      expect(r.err).not.toMatch(/options\.|no-such-trace/);
    }
    const x = await capture(() => main(['fleet', 'no-such-trace.jsonl', '--long-prefill-token-threshold', '64']));
    expect(x.err).toBe('kvpool: --long-prefill-token-threshold needs --engine vllm: chunked prefill belongs to vLLM\'s scheduler; the xllm replay kernel prefills each prompt whole\n');
  });

  it('the table names the engine and its options; CSV adds them as columns; xllm\'s CSV is unchanged', async () => {
    const t = await capture(() => main(['fleet', '--requests', '100', '--engine', 'vllm', '--engines', '2', '--timing', 'default']));
    expect(t.code).toBe(0);
    expect(t.out).toMatch(/engine vllm · max num batched tokens 8192 · long prefill token threshold 0 · reserve full ISL yes · engines 2/);
    expect(t.out).toMatch(/timing polynomial · scheduler vllm · speedup 1/);
    expect(t.out).not.toMatch(/eviction/);
    const c = await capture(() => main(['fleet', '--requests', '60', '--engine', 'vllm', '--engines', '2', '--format', 'csv']));
    const [header, row] = c.out.trimEnd().split('\n');
    const cols = header!.split(',');
    for (const e of FLEET_VLLM_CONFIG_GLOSSARY) expect(cols).toContain(e.key);
    expect(row!.split(',')[cols.indexOf('config.engine')]).toBe('vllm');
    const x = await capture(() => main(['fleet', '--requests', '60', '--engines', '2', '--format', 'csv']));
    expect(x.out.split('\n')[0]).not.toMatch(/config\.engine,|longPrefill/);
  });

  it('--slo-ttft-ms searches vLLM fleets, and says when no fleet can meet the target under the vllm engine\'s budget', async () => {
    const args = ['fleet', '--requests', '60', '--engine', 'vllm', '--num-blocks', '3000', '--max-num-batched-tokens', '256', '--timing', 'default', '--speedup', '40', '--no-progress'];
    const j = JSON.parse((await capture(() => main([...args, '--engines', '2', '--slo-ttft-ms', '50', '--json']))).out);
    expect(j.slo.answers[0].engines).toBeNull();
    expect(j.slo.answers[0].why).toMatch(/^no fleet can meet it: /);
    expect(j.runs.every((r: FleetRun) => r.config.engine === 'vllm' && r.latency!.scheduler === 'vllm')).toBe(true);
    const ok = JSON.parse((await capture(() => main([...args, '--engines', '3', '--slo-ttft-ms', '1e9', '--json']))).out);
    expect(ok.slo.answers[0].engines).toBe(1);
  });

  it('--events FILE writes each engine\'s stream to a file of its own, on either clock and for either engine: each rebuilds its engine\'s cache', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvpool-fleet-events-'));
    for (const [engine, timed] of [['vllm', false], ['vllm', true], ['xllm', false], ['xllm', true]] as const) {
      const file = join(dir, `${engine}-${timed}.msgpack`);
      const args = ['fleet', '--requests', '80', '--engine', engine, '--engines', '2', '--router', 'least-loaded', '--num-blocks', '500', '--max-running', '4', '--json', '--no-progress', ...(timed ? ['--timing', 'default'] : [])];
      const r = await capture(() => main([...args, '--events', file]));
      expect(r.code, r.err).toBe(0);
      const run = JSON.parse(r.out) as FleetRun;
      const lib = fleetSync({ requests: 80, engine, engines: 2, router: 'least-loaded', numBlocks: 500, maxRunning: 4, ...(timed && { timing: true }) });
      expect(run.matchedBlocks).toBe(lib.matchedBlocks);
      for (const e of [0, 1]) {
        const idx = new KVEventIndex({ countCopies: engine === 'vllm' });
        for (const b of decodeVllmEventBatches(readFileSync(join(dir, `${engine}-${timed}.engine-${e}.msgpack`)))) idx.applyBatch('x', b);
        const er = lib.engines[e]!.run as { cachedKeysAtEnd?: number; cachedBlocksAtEnd: number };
        expect(idx.blocks('x').length, `${engine} ${timed} engine ${e}`).toBe(er.cachedKeysAtEnd ?? er.cachedBlocksAtEnd);
        expect(idx.blocks('x').length).toBeGreaterThan(0);
      }
    }
    expect(engineEventFile('a/b.c/events', 3)).toBe('a/b.c/events.engine-3');
    expect(engineEventFile('x.msgpack', 0)).toBe('x.engine-0.msgpack');
    const bad = await capture(() => main(['fleet', '--requests', '10', '--engines', '1,2', '--events', join(dir, 'x.msgpack')]));
    expect(bad.err).toMatch(/--events writes one fleet's streams: give one --router and one --engines/);
  });

  it('--help says how to choose the engine; docs/fleet.md and docs/fleet-time.md document engine vllm', async () => {
    const r = await capture(() => main(['fleet', '--help']));
    for (const flag of ['--engine <engine>', '--max-num-seqs <n>', '--num-gpu-blocks-override <n>', '--long-prefill-token-threshold <n>', '--no-scheduler-reserve-full-isl']) expect(r.out).toContain(flag);
    expect(r.out).toMatch(/Choose vllm to plan a vLLM fleet/);
    const fleetDoc = readFileSync(new URL('docs/fleet.md', root), 'utf8');
    const timeDoc = readFileSync(new URL('docs/fleet-time.md', root), 'utf8');
    expect(fleetDoc).toContain('### A fleet of vLLM engines');
    expect(timeDoc).toContain("## Engine 'vllm'");
    for (const e of FLEET_VLLM_CONFIG_GLOSSARY) expect(fleetDoc + timeDoc, e.key).toContain(`\`${e.key.slice('config.'.length)}\``);
  });
});
