// `sweep()` and `kvpool sweep`: every configuration of the grid replayed on
// worker threads gives exactly the result of the same replay run alone, in
// grid order, with progress reported as it goes.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import { sweep, sweepConfigurations } from '../bindings/node/sweep.js';
import { replaySync, type ReplayRun } from '../bindings/replay/replay.js';
import { generateWorkload } from '../bindings/replay/workload.js';
import { capture } from './support/capture.js';

const timingFree = (r: ReplayRun) => ({ ...r, seconds: 0, allocateCallsPerSecond: 0 });

describe('sweepConfigurations', () => {
  it('is every combination, the first grid key varying slowest', () => {
    const c = sweepConfigurations({ requests: 10 }, { numBlocks: [100, 200], eviction: ['lru', 'lfu', 'priority'], hostBlocks: [0, 500] });
    expect(c.length).toBe(12);
    expect(c.slice(0, 3)).toEqual([
      { requests: 10, numBlocks: 100, eviction: 'lru', hostBlocks: 0 },
      { requests: 10, numBlocks: 100, eviction: 'lru', hostBlocks: 500 },
      { requests: 10, numBlocks: 100, eviction: 'lfu', hostBlocks: 0 },
    ]);
    expect(c[11]).toEqual({ requests: 10, numBlocks: 200, eviction: 'priority', hostBlocks: 500 });
  });

  it('rejects an unknown or empty grid entry', () => {
    expect(() => sweepConfigurations({}, { bogus: [1] } as never)).toThrow(/grid: unknown option "bogus"/);
    expect(() => sweepConfigurations({}, { numBlocks: [] })).toThrow(/grid.numBlocks must be a non-empty array/);
  });
});

describe('sweep()', () => {
  const trace = generateWorkload({ requests: 250, seed: 21 });

  it('gives, on worker threads, exactly the results of the replays run alone, in grid order', async () => {
    const seen: number[] = [];
    let last = { requestsDone: 0, requestsTotal: 0, runsDone: 0, runsTotal: 0 };
    const runs = await sweep({
      trace,
      maxRunning: 16,
      grid: { numBlocks: [700, 1400], eviction: ['lru', 'lfu'], dpSize: [1, 2] },
      workers: 2,
      onProgress: (p) => {
        seen.push(p.requestsDone);
        last = p;
      },
    });
    const configs = sweepConfigurations({ trace, maxRunning: 16 }, { numBlocks: [700, 1400], eviction: ['lru', 'lfu'], dpSize: [1, 2] });
    expect(runs.length).toBe(8);
    for (const [i, c] of configs.entries()) expect(timingFree(runs[i]!), `configuration ${i}`).toEqual(timingFree(replaySync(c)));
    expect(new Set(runs.map((r) => r.hitRate)).size).toBeGreaterThan(4);
    expect(last).toEqual({ requestsDone: 8 * 250, requestsTotal: 8 * 250, runsDone: 8, runsTotal: 8 });
    expect(seen.every((x, i) => i === 0 || x >= seen[i - 1]!)).toBe(true);
    expect(seen.length).toBeGreaterThan(8); // progress within runs, not only at their ends
  });

  it('checks every configuration before starting, naming the one that is wrong', async () => {
    await expect(sweep({ requests: 10, grid: { slidingWindow: [64], eviction: ['lru', 'lfu'] } })).rejects.toThrow(
      /configuration 2 of 2 \(eviction=lfu slidingWindow=64\): options.eviction 'lfu' cannot be combined with options.slidingWindow/,
    );
    // A value out of range stays a RangeError.
    await expect(sweep({ requests: 10, grid: { numBlocks: [1] } })).rejects.toThrow(new RangeError('configuration 1 of 1 (numBlocks=1): options.numBlocks must be >= 2, got 1'));
    await expect(sweep({ requests: 10, grid: { numBlocks: [1] } })).rejects.toThrow(RangeError);
    await expect(sweep({ requests: 10, grid: { numBlocks: [64] }, onProgress: 5 as never })).rejects.toThrow(new TypeError('options.onProgress must be a function, got 5'));
  });

  it('rejects with the error of a progress callback that throws (the process goes on)', async () => {
    const boom = new Error('progress bar broke');
    await expect(sweep({ requests: 50, grid: { numBlocks: [64, 128] }, workers: 2, onProgress: () => { throw boom; } })).rejects.toBe(boom);
    // The next sweep runs as usual.
    expect((await sweep({ requests: 20, grid: { numBlocks: [64] }, workers: 1 })).length).toBe(1);
  });
});

describe('kvpool sweep', () => {
  it('prints one row per configuration, the varied options first', async () => {
    const r = await capture(() => main(['sweep', '--requests', '200', '--num-blocks', '800,1600', '--host-blocks', '0,4000', '--workers', '2']));
    expect(r.code).toBe(0);
    const lines = r.out.trimEnd().split('\n');
    expect(lines[0]).toBe('kvpool sweep: built-in workload (200 requests), 4 configurations');
    expect(lines[1]).toMatch(/^\s*num-blocks\s+host-blocks\s+hit rate\s+matched\s+evicted\s+host hits\s+loaded\s+(rejected\s+truncated\s+)?seconds$/);
    expect(lines.length).toBe(6);
    const direct = replaySync({ requests: 200, numBlocks: 1600, hostBlocks: 4000 });
    if (direct.mode !== 'host-tier') throw new Error(direct.mode);
    expect(lines[5]).toMatch(new RegExp(`^\\s*1600\\s+4000\\s+${(direct.hitRate * 100).toFixed(2)} %.*\\s${direct.hostTier.blocksLoaded.toLocaleString('en-US')}\\s`));
  });

  it('--format json is an array of full results, csv one row each', async () => {
    const j = await capture(() => main(['sweep', '--requests', '50', '--block-size', '8,16', '--format', 'json', '--workers', '1']));
    const arr = JSON.parse(j.out) as ReplayRun[];
    expect(arr.map((x) => x.config.blockSize)).toEqual([8, 16]);
    expect(timingFree(arr[0]!)).toEqual(timingFree(replaySync({ requests: 50, blockSize: 8 })));
    const c = await capture(() => main(['sweep', '--requests', '50', '--block-size', '8,16', '--format', 'csv', '--workers', '1']));
    const rows = c.out.trimEnd().split('\n');
    expect(rows.length).toBe(3);
    const col = rows[0]!.split(',').indexOf('config.blockSize');
    expect(rows.slice(1).map((row) => row.split(',')[col])).toEqual(['8', '16']);
  });

  it('takes its trace as an argument, as replay and fleet do: the same sweep as --trace', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvpool-sweep-trace-'));
    try {
      const file = join(dir, 'trace.jsonl');
      // Mooncake's line format (snake case, hash ids as an array).
      const line = (r: ReturnType<typeof generateWorkload>[number]) => JSON.stringify({ timestamp: r.timestamp, input_length: r.inputLength, output_length: r.outputLength, hash_ids: [...r.hashIds] });
      writeFileSync(file, generateWorkload({ requests: 40, seed: 3 }).map(line).join('\n') + '\n');
      const args = ['--num-blocks', '200,400', '--format', 'json', '--workers', '1'];
      const positional = await capture(() => main(['sweep', file, ...args]));
      expect(positional.code).toBe(0);
      const flag = await capture(() => main(['sweep', '--trace', file, ...args]));
      const runs = (out: string) => (JSON.parse(out) as ReplayRun[]).map(timingFree);
      expect(runs(positional.out)).toEqual(runs(flag.out));
      expect(runs(positional.out).map((r) => r.requests)).toEqual([40, 40]);
      const both = await capture(() => main(['sweep', file, '--trace', 'mooncake-conversation', ...args]));
      expect(both.code).not.toBe(0);
      expect(both.err).toMatch(/two traces given/);
    } finally {
      rmSync(dir, { recursive: true });
    }
  });

  it('refuses a report file it cannot write as HTML or SVG', async () => {
    const r = await capture(() => main(['sweep', '--requests', '5', '--report', 'out.pdf']));
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/--report "out.pdf": the file must end in .html or .svg/);
  });
});
