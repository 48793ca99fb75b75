// `replay({ engine: 'vllm' })` and `kvpool replay --engine vllm`: the
// harness's figures and per-step lines through the public API and the
// command (--json, --steps-out), the engine choice leaving the xllm engine
// byte-identical, vLLM's option names, refusals naming the option and the
// reason, the dp rule's claim, and in CI the whole conversation trace.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import { VLLM_CONFIG_GLOSSARY, VLLM_RESULT_GLOSSARY, VLLM_RANK_GLOSSARY } from '../bindings/cli/vllm-glossary.js';
import * as platform from '../bindings/index.js';
import * as node from '../bindings/index.node.js';
import { readTraceFile } from '../bindings/node/trace-file.js';
import { replaySync as xllmReplaySync } from '../bindings/replay/replay.js';
import { VllmEngine, stepLine, type VllmReplayRun } from '../bindings/index.js';
import { VllmKvCacheManager } from '../bindings/vllm/kv-cache-manager.js';
import { VllmRequest } from '../bindings/vllm/request.js';
import { capture } from './support/capture.js';
import { TRACE_PATH } from './support/externals.js';
import { HARNESS_FIGURES, harnessRun, harnessSteps, type HarnessRun } from './support/vllm-fixtures.js';

const root = new URL('..', import.meta.url);

/** The harness's figures of a run, and the same figures of a result. */
const recorded = (h: HarnessRun) => Object.fromEntries(HARNESS_FIGURES.map((k) => [k, h[k]]));
const ours = (r: VllmReplayRun) => Object.fromEntries(HARNESS_FIGURES.map((k) => [k, r[k]]));

/** The replay options of a recorded run. */
function optionsOf(h: HarnessRun) {
  const c = h.config;
  return {
    engine: 'vllm' as const, limit: c.limit ?? undefined, blockSize: c.blockSize, numBlocks: c.numBlocks, maxNumSeqs: c.maxRunning, dpSize: c.dpSize ?? 1,
    ...(c.maxNumBatchedTokens < 2 ** 31 - 1 && { maxNumBatchedTokens: c.maxNumBatchedTokens }),
    longPrefillTokenThreshold: c.longPrefillTokenThreshold, schedulerReserveFullIsl: c.reserveFullIsl === true,
  };
}

describe('replay({ engine: "vllm" }) against vLLM\'s own runs', () => {
  for (const name of ['sched500_n8192_chunk8192', 'reserve_n700_w8_t1024', 'dp2_n2048_w16_t4096', 'b16_n2048_t4096_thr1024']) {
    it(`${name}: the figures and every step line`, async () => {
      const h = harnessRun(name);
      let lines = '';
      const r = await node.replay({ ...optionsOf(h), trace: 'mooncake-conversation', onStep: (s) => (lines += stepLine(s)) });
      expect(ours(r)).toEqual(recorded(h));
      if (h.allocateCalls !== undefined) expect(r.allocateCalls).toBe(h.allocateCalls);
      expect(lines === harnessSteps(name)).toBe(true);
      expect(r.config).toMatchObject({ engine: 'vllm', trace: 'mooncake-conversation', limit: h.config.limit });
      expect(r.ranks.length).toBe(h.config.dpSize ?? 1);
      expect(r.ranks.reduce((a, k) => a + k.matchedBlocks, 0)).toBe(r.matchedBlocks);
    });
  }

  it('the platform entry takes parsed requests and gives the same result', async () => {
    const h = harnessRun('b16_n512_w8');
    const trace = await readTraceFile(TRACE_PATH, 200);
    const r = await platform.replay({ ...optionsOf(h), trace });
    expect(ours(r)).toEqual(recorded(h));
    expect(r.config.trace).toBe('requests');
  });

  it('reserve-full-isl (on by default) changes nothing without a token budget or threshold, and changes the schedule with one', async () => {
    const h = harnessRun('sched500_n1024');
    const trace = await readTraceFile(TRACE_PATH, 500);
    const { schedulerReserveFullIsl: _off, ...rest } = optionsOf(h);
    const r = platform.replaySync({ ...rest, trace });
    expect(r.config.schedulerReserveFullIsl).toBe(true);
    expect(ours(r)).toEqual(recorded(h));
    const chunked = harnessRun('sched500_n8192_chunk8192');
    const on = platform.replaySync({ ...optionsOf(chunked), schedulerReserveFullIsl: true, trace });
    expect(ours(on)).not.toEqual(recorded(chunked));
  });

  it('dp ranks: the lazy replay equals every request added at once through the load balancer', async () => {
    const trace = await readTraceFile(TRACE_PATH, 120);
    const o = { engine: 'vllm' as const, numBlocks: 1500, dpSize: 3, maxNumSeqs: 8, maxNumBatchedTokens: 2048 };
    let lines = '';
    const r = platform.replaySync({ ...o, trace, onStep: (s) => (lines += stepLine(s)) });
    const shared = { h: 0 };
    const kvs = [0, 1, 2].map((dpRank) => new VllmKvCacheManager({ numBlocks: 1500, blockSize: 16, dpRank, sharedChecksum: shared }));
    const engine = new VllmEngine(kvs, { maxNumSeqs: 8, maxNumBatchedTokens: 2048, longPrefillTokenThreshold: 0, reserveFullIsl: true });
    const ranks = trace.map((t, i) => engine.add(new VllmRequest(i, t)));
    expect(ranks.slice(0, 7)).toEqual([0, 1, 2, 0, 1, 2, 0]);
    let direct = '';
    while (engine.hasWork) {
      engine.schedule(null);
      engine.complete();
      direct += stepLine(engine.last);
    }
    expect(direct === lines).toBe(true);
    expect(shared.h).toBe(r.idChecksum);
    kvs.forEach((k) => k.dispose());
  });
});

describe('choosing an engine', () => {
  it('engine xllm (or none) gives the xllm replay unchanged; vLLM\'s names of --max-running and --num-blocks mean the same', async () => {
    const timingFree = (r: { seconds: number; allocateCallsPerSecond: number }) => ({ ...r, seconds: 0, allocateCallsPerSecond: 0 });
    const base = timingFree(xllmReplaySync({ requests: 200, numBlocks: 2000, maxRunning: 16 }));
    expect(timingFree(platform.replaySync({ requests: 200, numBlocks: 2000, maxRunning: 16 }))).toEqual(base);
    expect(timingFree(platform.replaySync({ engine: 'xllm', requests: 200, numGpuBlocksOverride: 2000, maxNumSeqs: 16 }))).toEqual(base);
    expect('engine' in base).toBe(false);
    const a = await capture(() => main(['replay', '--json', '--requests', '200', '--num-blocks', '2000', '--max-running', '16']));
    const b = await capture(() => main(['replay', '--json', '--engine', 'xllm', '--requests', '200', '--num-gpu-blocks-override', '2000', '--max-num-seqs', '16']));
    expect(timingFree(JSON.parse(b.out))).toEqual(timingFree(JSON.parse(a.out)));
    expect(timingFree(JSON.parse(a.out))).toEqual(base);
  });

  it('refuses, by name and with the reason, what one engine does not take', async () => {
    const xllmOnly = { publishAfterPrefill: true, eviction: 'lfu', hostBlocks: 100, storeBlocks: 10, slidingWindow: 64, compressRatios: [1], linearStateSlots: 8 };
    for (const [k, v] of Object.entries(xllmOnly)) {
      expect(() => platform.replaySync({ engine: 'vllm', requests: 5, [k]: v } as never), k).toThrow(new RegExp(`options.${k} cannot be used with engine 'vllm': .+`));
    }
    for (const k of ['maxNumBatchedTokens', 'longPrefillTokenThreshold', 'schedulerReserveFullIsl']) {
      expect(() => platform.replaySync({ requests: 5, [k]: k === 'schedulerReserveFullIsl' ? false : 64 } as never), k).toThrow(new RegExp(`options.${k} needs engine 'vllm'`));
    }
    await expect(platform.replay({ engine: 'sglang' } as never)).rejects.toThrow(/options.engine must be 'xllm' or 'vllm', got "sglang"/);
    expect(() => platform.replaySync({ engine: 'vllm', maxRunning: 4, maxNumSeqs: 8 })).toThrow(/options.maxRunning and options.maxNumSeqs are one option .* disagree: 4 and 8/);
    expect(() => platform.replaySync({ engine: 'vllm', numBlocks: 40, numGpuBlocksOverride: 50 })).toThrow(/options.numBlocks and options.numGpuBlocksOverride/);
    expect(() => platform.replaySync({ engine: 'vllm', maxNumBatchedTokens: 0 })).toThrow(/options.maxNumBatchedTokens must be >= 1/);
    expect(() => platform.replaySync({ engine: 'vllm', longPrefillTokenThreshold: -1 })).toThrow(/options.longPrefillTokenThreshold/);
    expect(() => platform.replaySync({ engine: 'vllm', schedulerReserveFullIsl: 'yes' } as never)).toThrow(/options.schedulerReserveFullIsl/);
    expect(() => platform.replaySync({ engine: 'vllm', numGpuBlocksOverride: 1 })).toThrow(/options.numGpuBlocksOverride/);
    expect(() => platform.replaySync({ engine: 'vllm', onStep: 3 } as never)).toThrow(/options.onStep must be a function/);
    expect(() => platform.replaySync({ engine: 'vllm', colour: 1 } as never)).toThrow(/unknown option "colour"/);
    expect(() => platform.replaySync({ engine: 'vllm', trace: [{ inputLength: 0, outputLength: 1, hashIds: new Int32Array(0) }] })).toThrow(/trace request 0: inputLength must be in \[1, /);
    expect(() => platform.replaySync({ engine: 'vllm', trace: [{ inputLength: 600, outputLength: 1, hashIds: Int32Array.of(1) }] })).toThrow(/trace request 0: hashIds must hold 2 ids/);
    for (const [args, message] of [
      [['--engine', 'vllm', '--eviction', 'lfu'], /--eviction cannot be used with --engine vllm: vLLM has one eviction order/],
      [['--engine', 'vllm', '--sliding-window', '64'], /--sliding-window cannot be used with --engine vllm: .*sliding-window attention/],
      [['--engine', 'vllm', '--linear-state-slots', '8'], /--linear-state-slots cannot be used with --engine vllm/],
      [['--engine', 'vllm', '--host-blocks', '100'], /--host-blocks cannot be used with --engine vllm: the vllm engine does not model a host tier/],
      [['--max-num-batched-tokens', '8192'], /--max-num-batched-tokens needs --engine vllm/],
      [['--no-scheduler-reserve-full-isl'], /--no-scheduler-reserve-full-isl needs --engine vllm/],
      [['--steps-out', join(tmpdir(), 'x.steps')], /--steps-out needs --engine vllm/],
      [['--engine', 'vllm', '--max-running', '3', '--max-num-seqs', '4'], /--max-running 3 and --max-num-seqs 4 are one option/],
      [['--engine', 'vllm', '--max-num-batched-tokens', '0'], /--max-num-batched-tokens must be >= 1/],
      [['--engine', 'sglang'], /--engine must be one of xllm, vllm, got "sglang"/],
      [['--engine', 'vllm', '--steps-out', join(tmpdir(), 'no-such-dir-kvpool', 'x.steps')], /--steps-out: cannot write ".*no-such-dir-kvpool.*x\.steps": ENOENT/],
    ] as Array<[string[], RegExp]>) {
      const r = await capture(() => main(['replay', '--requests', '5', ...args]));
      expect(r.code, args.join(' ')).not.toBe(0);
      expect(r.err, args.join(' ')).toMatch(message);
    }
  });
});

describe('kvpool replay --engine vllm', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvpool-vllm-'));

  it('--json prints the harness\'s figures and --steps-out writes its per-step lines, byte for byte', async () => {
    const h = harnessRun('sched500_chunk8192');
    const steps = join(dir, 'run.steps');
    const r = await capture(() => main(['replay', 'mooncake-conversation', '--engine', 'vllm', '--limit', '500', '--max-num-batched-tokens', '8192', '--no-scheduler-reserve-full-isl', '--json', '--steps-out', steps]));
    expect(r.code).toBe(0);
    const run = JSON.parse(r.out) as VllmReplayRun;
    expect(ours(run)).toEqual(recorded(h));
    expect(run.allocateCalls).toBe(h.allocateCalls);
    expect(readFileSync(steps, 'utf8') === harnessSteps(h.name)).toBe(true);
    expect(run.config).toEqual({
      engine: 'vllm', trace: 'mooncake-conversation', requests: null, limit: 500, blockSize: 16, numBlocks: 65536, dpSize: 1, maxNumSeqs: 32,
      maxNumBatchedTokens: 8192, longPrefillTokenThreshold: 0, schedulerReserveFullIsl: false, seed: 1024,
    });
  });

  it('the table, CSV and JSON Lines show the same figures; the table has the per-rank rows with several ranks', async () => {
    const args = ['replay', '--engine', 'vllm', '--requests', '150', '--num-gpu-blocks-override', '1200', '--dp-size', '2', '--max-num-seqs', '8', '--max-num-batched-tokens', '1024'];
    const json = JSON.parse((await capture(() => main([...args, '--json']))).out) as VllmReplayRun;
    expect(json.preemptions).toBeGreaterThan(0);
    const table = (await capture(() => main(args))).out;
    expect(table).toMatch(/^kvpool replay: built-in workload \(seed 1024\), 150 requests, engine vllm/);
    expect(table).toMatch(/blocks per rank 1200 · dp size 2 · max num seqs 8 · max batched tokens 1024/);
    expect(table).toMatch(new RegExp(`preemptions\\s+${json.preemptions}\\n`));
    expect(table).toMatch(new RegExp(`hit rate\\s+${(json.hitRate * 100).toFixed(2)} %`));
    expect(table).toMatch(/rank\s+admitted\s+preempted/);
    const csv = (await capture(() => main([...args, '--format', 'csv']))).out.trim().split('\n');
    expect(csv.length).toBe(2);
    const cols = csv[0]!.split(',');
    const vals = csv[1]!.split(',');
    expect(vals[cols.indexOf('idChecksum')]).toBe(String(json.idChecksum));
    expect(vals[cols.indexOf('config.maxNumBatchedTokens')]).toBe('1024');
    const jsonl = (await capture(() => main([...args, '--format', 'jsonl']))).out;
    expect(ours(JSON.parse(jsonl))).toEqual(ours(json));
  });

  it('--help says how to choose an engine, and kvpool --help too', async () => {
    const r = await capture(() => main(['replay', '--help']));
    expect(r.out).toMatch(/--engine <engine>/);
    expect(r.out).toMatch(/Engines \(--engine; docs\/engines.md\)/);
    expect(r.out).toMatch(/--max-num-seqs <n>/);
    expect(r.out).toMatch(/--steps-out <file>/);
    const top = await capture(() => main(['--help']));
    expect(top.out).toMatch(/--engine vllm/);
  });

  it('the example of docs/engines.md runs', () => {
    const doc = readFileSync(new URL('docs/engines.md', root), 'utf8');
    const code = /```ts\n([\s\S]*?)```/.exec(doc)![1]!.replace("from 'kvpool'", `from '${new URL('bindings/index.node.ts', root).pathname}'`);
    const file = join(mkdtempSync(join(tmpdir(), 'kvpool-doc-')), 'example.ts');
    writeFileSync(file, code);
    const r = spawnSync(process.execPath, ['--import', 'tsx', file], { cwd: root.pathname, encoding: 'utf8', timeout: 60_000 });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    // 1200 prompt tokens in one step, then 39 decodes: 40 steps; 75 + 3 blocks allocated (1239 slots).
    expect(r.stdout).toMatch(/^40 \{/);
    expect(r.stdout).toMatch(/allocatedBlocks: 78/);
  }, 60_000);

  it('docs/engines.md explains every field of the result, the configuration and the per-rank rows', () => {
    const doc = readFileSync(new URL('docs/engines.md', root), 'utf8');
    for (const e of [...VLLM_RESULT_GLOSSARY, ...VLLM_CONFIG_GLOSSARY, ...VLLM_RANK_GLOSSARY]) {
      expect(doc, e.key).toContain(`\`${e.key.split(/[.\]]/).pop()}\``);
    }
  });
});

// The whole conversation trace: the harness's recorded whole-trace runs (CI: KVPOOL_FULL_REPLAY=1).
describe.runIf(process.env['KVPOOL_FULL_REPLAY'] === '1')('the whole conversation trace on the vLLM engine (CI)', () => {
  for (const name of ['whole_n65536', 'whole_n16384', 'whole_n65536_chunk8192']) {
    it(name, async () => {
      const h = harnessRun(name);
      const r = await node.replay({ ...optionsOf(h), limit: undefined, trace: 'mooncake-conversation' });
      expect(ours(r)).toEqual(recorded(h));
      if (h.allocateCalls !== undefined) expect(r.allocateCalls).toBe(h.allocateCalls);
    }, 120_000);
  }
});
