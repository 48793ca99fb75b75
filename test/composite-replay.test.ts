// The replay kernel on a composite pool (`kvpool replay --sliding-window W`):
// the Wasm pool and the reference model give the identical result, with
// per-sub-manager peaks and window releases; the default replay is unchanged.

import { describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import { readTraceFile } from '../bindings/node/trace-file.js';
import type { CompositeReplayRun } from '../bindings/replay/replay.js';
import { type ReplayResult } from '../bindings/replay/kernel.js';
import { runReplay } from '../bindings/replay/stepper.js';
import { replaySync } from '../bindings/replay/replay.js';
import type { TraceRequest } from '../bindings/replay/trace.js';
import { generateWorkload } from '../bindings/replay/workload.js';
import { ModelBlockManagerPool } from '../model/block-manager-pool.js';
import { TRACE_PATH as TRACE, haveTrace } from './support/externals.js';
import { ModelCompositeReplayTarget } from './support/model-composite-replay-target.js';
import { capture } from './support/capture.js';
import { figures } from './support/replay-figures.js';


interface Run {
  numBlocks: number;
  blockSize?: number;
  maxRunning?: number;
  slidingWindow: number;
  compressRatios?: number[];
}

function both(trace: TraceRequest[], o: Run) {
  const blockSize = o.blockSize ?? 16;
  const maxRunning = o.maxRunning ?? 32;
  const ratios = o.compressRatios ?? [1];
  const core = replaySync({ trace, numBlocks: o.numBlocks, blockSize, maxRunning, slidingWindow: o.slidingWindow, compressRatios: o.compressRatios }) as CompositeReplayRun;
  const target = new ModelCompositeReplayTarget(
    new ModelBlockManagerPool({
      blockSize,
      numBlocks: o.numBlocks,
      managerTypes: ['sliding-window', ...ratios.map(() => 'full' as const)],
      compressRatios: [0, ...ratios],
      slidingWindowSize: o.slidingWindow,
      maxSeqsPerBatch: maxRunning,
    }),
  );
  const model = { ...runReplay(target, trace, { blockSize, maxRunning, publishAfterPrefill: false }), subManagers: target.subManagers() };
  return { core, model };
}

describe('composite replay: core vs reference model', () => {
  const workload = generateWorkload({ requests: 300, seed: 11 });

  it('agrees on the built-in workload, with the window releasing blocks', () => {
    const { core, model } = both(workload, { numBlocks: 3000, slidingWindow: 64, compressRatios: [1, 4] });
    expect(figures(core)).toEqual(figures(model));
    const [swa, full, coarse] = core.subManagers;
    expect(swa!.kind).toBe('sliding-window');
    expect(swa!.releasedBlocks).toBeGreaterThan(1000);
    expect(full!.releasedBlocks).toBe(0);
    expect(coarse!.blockSize).toBe(64);
    // A window keeps at most (W - 1) / B + 1 blocks after each step, plus the step's new one.
    expect(swa!.peakUsedBlocks).toBeLessThan(full!.peakUsedBlocks);
    expect(core.matchedBlocks).toBe(0); // no prefix cache on a composite
    expect(core.freeBlocksAtEnd).toBe(2999);
    expect(core.allocatedBlocks).toBe(full!.allocatedBlocks);
  });

  it('agrees when requests are rejected and decodes truncated', () => {
    const { core, model } = both(workload.slice(0, 120), { numBlocks: 600, maxRunning: 4, blockSize: 8, slidingWindow: 40 });
    expect(core.rejected + core.truncated).toBeGreaterThan(0);
    expect(figures(core)).toEqual(figures(model));
  });

  it.skipIf(!haveTrace)('agrees on the first 300 requests of the Mooncake conversation trace', async () => {
    const trace = await readTraceFile(TRACE, 300);
    const { core, model } = both(trace, { numBlocks: 65536, slidingWindow: 4096, compressRatios: [1, 4] });
    expect(figures(core)).toEqual(figures(model));
    expect(core.subManagers[0]!.releasedBlocks).toBeGreaterThan(0);
  });

  it('leaves the default replay result as it was', () => {
    const r = replaySync({ trace: workload.slice(0, 30), numBlocks: 4096 });
    expect('subManagers' in r).toBe(false);
    expect(() => replaySync({ trace: workload, compressRatios: [1, 4] })).toThrow(/options.compressRatios needs options.slidingWindow/);
    expect(() => replaySync({ trace: workload, slidingWindow: 0 })).toThrow(/options.slidingWindow must be >= 1, got 0/);
    expect(() => replaySync({ trace: workload, slidingWindow: 8, compressRatios: [] })).toThrow(/options.compressRatios must be a non-empty array/);
  });
});

describe('kvpool replay --sliding-window (CLI)', () => {
  it('--json prints the result with one row per sub-manager', async () => {
    const r = await capture(() => main(['replay', '--json', '--requests', '40', '--num-blocks', '4096', '--sliding-window', '128', '--compress-ratios', '1,4']));
    expect(r.code).toBe(0);
    const obj = JSON.parse(r.out);
    expect(obj.subManagers.map((s: { kind: string; blockSize: number }) => [s.kind, s.blockSize])).toEqual([
      ['sliding-window', 16],
      ['full', 16],
      ['full', 64],
    ]);
    const direct = replaySync({ requests: 40, numBlocks: 4096, slidingWindow: 128, compressRatios: [1, 4] });
    expect(figures(obj)).toEqual(figures(direct));
  });

  it('prints the sub-manager rows in the table', async () => {
    const r = await capture(() => main(['replay', '--requests', '20', '--sliding-window', '64']));
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/sliding window 64 · compress ratios 1\b/);
    expect(r.out).toMatch(/sub-manager\s+kind\s+block size\s+blocks\s+peak used\s+allocated\s+released/);
    expect(r.out).toMatch(/\n\s+0\s+sliding-window\s+16\s+/);
  });

  it('rejects bad values with exit code 1', async () => {
    const bad = await capture(() => main(['replay', '--sliding-window', '64', '--compress-ratios', '1,x']));
    expect(bad.code).toBe(1);
    expect(bad.err).toMatch(/--compress-ratios must be a comma-separated list of integers >= 1, got "1,x"/);
    const lone = await capture(() => main(['replay', '--compress-ratios', '4']));
    expect(lone.code).toBe(1);
    expect(lone.err).toMatch(/--compress-ratios needs --sliding-window/);
  });
});
