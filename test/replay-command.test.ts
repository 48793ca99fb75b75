// `kvpool replay` as a user meets it: every output echoes the configuration,
// tables in percent, CSV / JSON Lines, --dp-size, --version, a glossary in
// --help, warnings for results that are probably mistakes; and `replay()`
// taking the command's option names.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import { replayCommand } from '../bindings/cli/replay-command.js';
import { RESULT_GLOSSARY, CONFIG_GLOSSARY, RANK_GLOSSARY, SUB_MANAGER_GLOSSARY } from '../bindings/cli/glossary.js';
import { replay as nodeReplay } from '../bindings/node/replay-file.js';
import { replay, replaySync, type ReplayRun } from '../bindings/replay/replay.js';
import { replaySync as engineReplaySync } from '../bindings/engines/replay.js';
import { generateWorkload } from '../bindings/replay/workload.js';
import { capture } from './support/capture.js';
import { figures } from './support/replay-figures.js';

const root = new URL('..', import.meta.url);
const timingFree = (r: ReplayRun) => ({ ...r, seconds: 0, allocateCallsPerSecond: 0 });

describe('kvpool replay: outputs', () => {
  it('--json echoes the configuration with every default filled in', async () => {
    const r = await capture(() => main(['replay', '--json', '--requests', '40', '--num-blocks', '3000', '--dp-size', '2', '--eviction', 'lfu']));
    expect(r.code).toBe(0);
    const obj = JSON.parse(r.out) as ReplayRun;
    expect(obj.mode).toBe('plain');
    expect(obj.config).toEqual({
      trace: 'workload', requests: 40, limit: null, blockSize: 16, numBlocks: 3000, dpSize: 2, maxRunning: 32, seed: 1024,
      publishAfterPrefill: false, eviction: 'lfu', hostBlocks: 0, storeBlocks: null, slidingWindow: null, compressRatios: null, linearStateSlots: null,
    });
    expect(timingFree(obj)).toEqual(timingFree(replaySync({ requests: 40, numBlocks: 3000, dpSize: 2, eviction: 'lfu' })));
  });

  it('the table shows the configuration and the hit rate in percent', async () => {
    const r = await capture(() => main(['replay', '--requests', '300', '--num-blocks', '2000']));
    const run = replaySync({ requests: 300, numBlocks: 2000 });
    expect(run.hitRate).toBeGreaterThan(0.05);
    expect(r.out).toMatch(new RegExp(`hit rate\\s+${(run.hitRate * 100).toFixed(2)} %`));
    expect(r.out).toMatch(/workload requests 300 · block size 16 · blocks per rank 2000 · dp size 1/);
    expect(r.out).toMatch(new RegExp(`id checksum\\s+${run.idChecksum.toLocaleString('en-US')}\\n`));
    expect(r.out).toMatch(/^kvpool replay: built-in workload \(seed 1024\), 300 requests, plain/m);
    const one = await capture(() => main(['replay', '--requests', '1']));
    expect(one.out).toMatch(/^kvpool replay: built-in workload \(seed 1024\), 1 request, plain/m);
  });

  it('--format csv has a header of config.* and figure columns, and the JSON values', async () => {
    const r = await capture(() => main(['replay', '--format', 'csv', '--requests', '60', '--num-blocks', '1500', '--host-blocks', '6000']));
    expect(r.code).toBe(0);
    const [header, row, ...rest] = r.out.trimEnd().split('\n');
    expect(rest).toEqual([]);
    const cols = header!.split(',');
    const vals = row!.split(',');
    const run = replaySync({ requests: 60, numBlocks: 1500, hostBlocks: 6000 });
    if (run.mode !== 'host-tier') throw new Error(run.mode);
    const at = (k: string) => vals[cols.indexOf(k)];
    expect(cols.slice(0, CONFIG_GLOSSARY.length)).toEqual(CONFIG_GLOSSARY.map((e) => e.key));
    expect(at('config.numBlocks')).toBe('1500');
    expect(at('config.hostBlocks')).toBe('6000');
    expect(at('config.slidingWindow')).toBe('');
    expect(at('mode')).toBe('host-tier');
    expect(Number(at('hitRate'))).toBe(run.hitRate);
    expect(Number(at('idChecksum'))).toBe(run.idChecksum);
    expect(Number(at('hostTier.blocksLoaded'))).toBe(run.hostTier.blocksLoaded);
    expect(cols).not.toContain('linearState.checkpointHits');
  });

  it('--format jsonl prints one object per line', async () => {
    const r = await capture(() => main(['replay', '--format', 'jsonl', '--requests', '10']));
    const lines = r.out.split('\n').filter(Boolean);
    expect(lines.length).toBe(1);
    expect(JSON.parse(lines[0]!).config.requests).toBe(10);
  });

  it('--dp-size spreads requests over ranks: per-rank rows, and the core agrees with the reference model', async () => {
    const r = await capture(() => main(['replay', '--requests', '200', '--num-blocks', '1500', '--dp-size', '3']));
    expect(r.out).toMatch(/rank\s+lookups\s+queried\s+hits\s+evicted\s+allocated\s+peak used/);
    const run = replaySync({ requests: 200, numBlocks: 1500, dpSize: 3 });
    expect(run.ranks.map((k) => k.dpRank)).toEqual([0, 1, 2]);
    expect(run.ranks.every((k) => k.allocatedBlocks > 0)).toBe(true);
    expect(run.ranks.reduce((a, k) => a + k.allocatedBlocks, 0)).toBe(run.allocatedBlocks);
    expect(run.freeBlocksAtEnd + run.cachedBlocksAtEnd).toBe(3 * 1499);
  });

  it('--version prints the package version', async () => {
    const pkg = JSON.parse(readFileSync(new URL('package.json', root), 'utf8'));
    const r = await capture(() => main(['--version']));
    expect(r.code).toBe(0);
    expect(r.out.trim()).toBe(pkg.version);
  });

  it('--help explains every result field', async () => {
    const r = await capture(() => main(['replay', '--help']));
    expect(r.code).toBe(0);
    for (const e of RESULT_GLOSSARY) expect(r.out).toContain(`${e.key} `);
    expect(r.out).toContain('--dp-size <n>');
    expect(r.out).toContain('--format <format>');
  });

  it('docs/replay.md explains every field of the result, the configuration and the per-rank and sub-manager rows', () => {
    const doc = readFileSync(new URL('docs/replay.md', root), 'utf8');
    for (const e of [...RESULT_GLOSSARY, ...CONFIG_GLOSSARY, ...RANK_GLOSSARY, ...SUB_MANAGER_GLOSSARY]) {
      expect(doc, e.key).toContain(`\`${e.key.split(/[.\]]/).pop()}\``);
    }
  });
});

describe('kvpool replay: warnings and errors', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvpool-cmd-'));

  it('warns about an empty trace on stderr, and in the result', async () => {
    const f = join(dir, 'empty.jsonl');
    writeFileSync(f, '\n');
    const r = await capture(() => main(['replay', f, '--json']));
    expect(r.code).toBe(0);
    expect(r.err).toMatch(/kvpool: warning: nothing was replayed: the trace has no requests/);
    expect(JSON.parse(r.out).warnings).toEqual(['nothing was replayed: the trace has no requests']);
  });

  it('warns when the pool is too small for any prompt', async () => {
    const r = await capture(() => main(['replay', '--requests', '20', '--num-blocks', '4']));
    expect(r.code).toBe(0);
    expect(r.err).toMatch(/kvpool: warning: every request was rejected: no prompt fits in a pool of 4 blocks of 16 tokens/);
  });

  it('takes --trace or the positional argument, not two different ones', async () => {
    const byName = await capture(() => main(['replay', '--trace', 'mooncake-conversation', '--limit', '50', '--json']));
    expect(byName.code).toBe(0);
    const obj = JSON.parse(byName.out);
    expect(obj.config.trace).toBe('mooncake-conversation');
    expect(obj.requests).toBe(50);
    const both = await capture(() => main(['replay', 'a.jsonl', '--trace', 'b.jsonl']));
    expect(both.code).toBe(1);
    expect(both.err).toMatch(/two traces given/);
  });

  it('checks the options before reading a trace', async () => {
    const r = await capture(() => main(['replay', '/nonexistent.jsonl', '--sliding-window', '64', '--host-blocks', '100']));
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/--host-blocks cannot be combined with --sliding-window: a host tier keeps prefix-cache blocks, and a composite pool has none/);
  });

  it("names flags as typed, and says its name once before the library's own errors", async () => {
    const host = await capture(() => main(['replay', '--host-blocks', '1']));
    expect(host.code).toBe(1);
    expect(host.err).toBe('kvpool: --host-blocks must be >= 2, got 1\n');
    const big = await capture(() => main(['replay', '--num-blocks', '100000000']));
    expect(big.code).toBe(1);
    expect(big.err).toMatch(/^kvpool: a pool of 1 rank\(s\) of 100000000 blocks needs [\d.]+ GiB of Wasm memory/);
  });

  it('stops quietly when the reader of its output goes away (| head)', () => {
    const tsx = new URL('node_modules/tsx/dist/cli.mjs', root).pathname;
    const p = spawnSync('sh', ['-c', `"${process.execPath}" "${tsx}" bindings/cli/main.ts replay --help | head -1`], { cwd: root.pathname, encoding: 'utf8' });
    expect(p.stdout).toBe('Usage: kvpool replay [options] [trace]\n');
    expect(p.stderr).toBe('');
  });

  it('reads a gzipped trace from standard input (the built command, through a pipe)', () => {
    const gz = readFileSync(new URL('traces/mooncake-conversation.jsonl.gz', root));
    const tsx = new URL('node_modules/tsx/dist/cli.mjs', root).pathname;
    const p = spawnSync(process.execPath, [tsx, 'bindings/cli/main.ts', 'replay', '-', '--limit', '30', '--json'], { cwd: root.pathname, input: gz, encoding: 'utf8' });
    expect(p.stderr).toBe('');
    expect(p.status).toBe(0);
    const r = JSON.parse(p.stdout);
    expect(r.config.trace).toBe('-');
    expect(r.requests).toBe(30);
  });
});

describe('replay() from a program', () => {
  it('takes the command line option names (camelCase), and nothing else', () => {
    const cliOnly = new Set([
      'format', 'json', 'progress', 'events', 'eventsFormat', 'eventHashes',
      'zmq', 'zmqReplay', 'zmqTopic', 'zmqInstance', 'zmqModel', 'zmqRanks', 'zmqReplayFrames', 'zmqBuffer', 'zmqDelay', 'zmqHold', 'stepsOut',
    ]);
    const names = replayCommand().options.map((o) => o.attributeName()).filter((n) => !cliOnly.has(n));
    const vllmOnly = ['maxNumBatchedTokens', 'longPrefillTokenThreshold', 'schedulerReserveFullIsl'];
    expect(names.sort()).toEqual(
      [
        'blockSize', 'compressRatios', 'dpSize', 'eviction', 'hostBlocks', 'limit', 'linearStateSlots', 'maxRunning', 'numBlocks', 'publishAfterPrefill', 'requests', 'seed', 'slidingWindow', 'storeBlocks', 'trace',
        'engine', 'maxNumSeqs', 'numGpuBlocksOverride', ...vllmOnly,
      ].sort(),
    );
    // Every one is an option replay() knows (unknown keys are rejected), for the engine that takes it.
    for (const n of names) {
      if (n === 'trace') continue;
      const engine = vllmOnly.includes(n) ? { engine: 'vllm' as const } : {};
      expect(() => engineReplaySync({ ...engine, [n]: undefined, requests: 0 })).not.toThrow();
    }
    expect(() => replaySync({ workloadRequests: 5 } as never)).toThrow(/unknown option|workloadRequests/);
  });

  it('returns a result whose mode says which parts it has', async () => {
    const trace = generateWorkload({ requests: 30, seed: 5 });
    const modes = await Promise.all([
      replay({ trace }),
      replay({ trace, linearStateSlots: 64 }),
      replay({ trace, slidingWindow: 64 }),
      replay({ trace, hostBlocks: 4096 }),
    ]);
    expect(modes.map((r) => r.mode)).toEqual(['plain', 'linear-state', 'composite', 'host-tier']);
    const parts = modes.map((r) => ['linearState', 'subManagers', 'hostTier'].filter((k) => k in r));
    expect(parts).toEqual([[], ['linearState'], ['subManagers'], ['hostTier']]);
    expect(modes.every((r) => r.config.trace === 'requests')).toBe(true);
  });

  it('in Node also takes a trace by name or file; the platform-neutral one says what to do instead', async () => {
    const r = await nodeReplay({ trace: 'mooncake-conversation', limit: 120, numBlocks: 8192 });
    expect(r.config.trace).toBe('mooncake-conversation');
    expect(r.requests).toBe(120);
    await expect(replay({ trace: 'mooncake-conversation' })).rejects.toThrow(/needs kvpool's Node entry/);
  });

  it('a host tier combines with the lfu and priority policies (the device cache takes the policy)', () => {
    const trace = generateWorkload({ requests: 200, seed: 9 });
    for (const eviction of ['lfu', 'priority'] as const) {
      const plain = replaySync({ trace, numBlocks: 1500, eviction });
      const tiered = replaySync({ trace, numBlocks: 1500, eviction, hostBlocks: 8000 });
      if (tiered.mode !== 'host-tier') throw new Error(tiered.mode);
      // Transfers complete at once, so the device sees exactly the plain replay.
      expect(figures(tiered)).toEqual({ ...figures(plain), hostTier: tiered.hostTier });
      expect(tiered.hostTier.blocksLoaded).toBeGreaterThan(0);
    }
  });
});
