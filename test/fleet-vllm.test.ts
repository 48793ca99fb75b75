// A fleet of vLLM engines (docs/fleet.md, docs/fleet-time.md, engine
// 'vllm'): one engine with every request at once is replay({ engine:
// 'vllm' }) step for step, on either clock; the fleet's figures are
// defined for it; a timed step is charged exactly the batch vLLM's
// scheduler reports, its tokens stamped at the step's end; options are
// checked by the engine's own rules.

import { describe, expect, it } from 'vitest';
import { readTraceFile } from '../bindings/node/trace-file.js';
import '../bindings/node/profile-files.js';
import { Fleet, fleetSync } from '../bindings/fleet/fleet.js';
import type { FleetOptions } from '../bindings/fleet/fleet-options.js';
import { tokenTimesMs } from '../bindings/fleet/fleet-latency.js';
import { sloSearch } from '../bindings/fleet/slo-search.js';
import type { TraceRequest } from '../bindings/replay/trace.js';
import { emptyStepBatch, type StepBatch, type TimingModel } from '../bindings/timing/timing-model.js';
import { VllmEngine } from '../bindings/vllm/engine.js';
import { VllmKvCacheManager } from '../bindings/vllm/kv-cache-manager.js';
import { replayVllmSync, type VllmReplayRun } from '../bindings/vllm/replay.js';
import { VllmRequest } from '../bindings/vllm/request.js';
import { TRACE_PATH } from './support/externals.js';

const trace = await readTraceFile(TRACE_PATH, 400);

function req(timestamp: number, L: number, O: number, ids: number[]): TraceRequest {
  return { timestamp, inputLength: L, outputLength: O, hashIds: Int32Array.from(ids) };
}

/** The figures replay() and a one-engine fleet share. */
function figures(r: VllmReplayRun) {
  const { config: _c, seconds: _s, allocateCallsPerSecond: _a, warnings: _w, ...rest } = r;
  return rest;
}

/** A model that reads every part of the batch and records it. */
function recording(): TimingModel & { batches: StepBatch[] } {
  const batches: StepBatch[] = [];
  return {
    name: 'recording',
    batches,
    stepMs(b) {
      batches.push(structuredClone(b));
      return 1 + 0.01 * b.prefillTokens + 0.5 * b.decodeSeqs + 1e-4 * b.decodeContextTokens + b.chunkContextTokens.reduce((a, x) => a + x, 0) * 1e-5;
    },
  };
}

describe('a fleet of one vLLM engine is replay({ engine: "vllm" })', () => {
  const cases: Array<[string, Partial<FleetOptions>]> = [
    ['8192-token budget, 2048 blocks (preemptions)', { numBlocks: 2048, maxNumBatchedTokens: 8192 }],
    ['2 dp ranks, 1024-token budget, threshold 256, no reserve', { numBlocks: 1500, dpSize: 2, maxNumBatchedTokens: 1024, longPrefillTokenThreshold: 256, schedulerReserveFullIsl: false }],
    ['vLLM\'s names: 16 seqs, 3000 gpu blocks', { numGpuBlocksOverride: 3000, maxNumSeqs: 16, maxNumBatchedTokens: 4096 }],
  ];
  for (const [name, o] of cases) {
    it(`on the step clock, every request at step 0: ${name}`, () => {
      const expected = replayVllmSync({ engine: 'vllm', trace, ...o } as Parameters<typeof replayVllmSync>[0]);
      expect(expected.evictedBlocks).toBeGreaterThan(0);
      const f = fleetSync({ trace, ...o, engine: 'vllm', engines: 1, arrival: 'instant' });
      const run = f.engines[0]!.run as VllmReplayRun;
      expect(figures(run)).toEqual(figures(expected));
      expect([f.requests, f.rejected, f.truncated, f.matchedBlocks, f.promptBlocks, f.evictedBlocks, f.hitRate]).toEqual([
        expected.requests, expected.rejected, expected.truncated, expected.matchedBlocks, expected.promptBlocks, expected.evictedBlocks, expected.hitRate,
      ]);
      expect(f.engines[0]!.idChecksum).toBe(expected.idChecksum);
      // The run ends at the step after the last one the engine ran (steps 0 to steps - 1).
      expect(f.steps).toBe(expected.steps - 1);
      expect(f.config).toMatchObject({ engine: 'vllm', maxNumBatchedTokens: o.maxNumBatchedTokens, schedulerReserveFullIsl: o.schedulerReserveFullIsl ?? true });
      expect(f.config).not.toHaveProperty('eviction');
    });

    it(`on the millisecond clock, every request at 0 ms: ${name}`, () => {
      const expected = replayVllmSync({ engine: 'vllm', trace, ...o } as Parameters<typeof replayVllmSync>[0]);
      const model = recording();
      const f = fleetSync({ trace, ...o, engine: 'vllm', engines: 1, arrival: 'instant', timing: model });
      expect(figures(f.engines[0]!.run as VllmReplayRun)).toEqual(figures(expected));
      expect(f.latency!.engines[0]!.steps).toBe(expected.steps);
      expect(f.latency!.preemptions).toBe(expected.preemptions);
      expect(model.batches).toHaveLength(expected.steps);
      expect(f.latency!.scheduler).toBe('vllm');
    });
  }
});

describe('the timed vLLM engine', () => {
  it('is charged the batch its scheduler reports, ranks in lockstep, and stamps tokens at the end of the step that sampled them', () => {
    // Two ranks, a 40-token budget each. The balancer (4 x waiting + running) puts requests 0 and 2 on rank 0,
    // request 1 on rank 1; request 0's 100-token prompt takes 3 steps, request 2 is admitted beside its last chunk.
    const t = [req(0, 100, 3, [1]), req(0, 30, 2, [2]), req(0, 20, 2, [3])];
    const model = recording();
    const o = { engine: 'vllm' as const, engines: 1, dpSize: 2, maxNumBatchedTokens: 40, numBlocks: 64, timing: model };
    const run = fleetSync({ trace: t, ...o });
    // The same engine stepped by hand: its batches are the ones the model saw.
    const kvs = [0, 1].map((dpRank) => new VllmKvCacheManager({ numBlocks: 64, blockSize: 16, dpRank }));
    const engine = new VllmEngine(kvs, { maxNumSeqs: 32, maxNumBatchedTokens: 40, longPrefillTokenThreshold: 0, reserveFullIsl: true });
    t.forEach((q, r) => engine.add(new VllmRequest(r, q)));
    const mine: StepBatch[] = [];
    const b = emptyStepBatch();
    while (engine.hasWork) {
      engine.schedule(b);
      mine.push(structuredClone(b));
      engine.complete();
    }
    for (const kv of kvs) kv.dispose();
    expect(model.batches).toEqual(mine);
    expect(mine[0]).toMatchObject({ dpRanks: 2, chunkTokens: [40, 30], chunkContextTokens: [0, 0], chunkRanks: [0, 1], prefillTokens: 70 });
    expect(mine[1]).toMatchObject({ chunkTokens: [40], chunkContextTokens: [40], chunkRanks: [0], decodeContexts: [31], decodeRanks: [1] });
    expect(mine[2]).toMatchObject({ chunkTokens: [20, 20], chunkContextTokens: [80, 0], chunkRanks: [0, 0], decodeSeqs: 0 });
    expect(mine).toHaveLength(5);
    const l = run.latency!;
    const ends = l.requests.stepEndMs[0]!;
    expect(l.engines[0]!.steps).toBe(5);
    // Request 0's first token ends step 2 (its last chunk), request 1's step 0, request 2's step 2.
    expect(l.requests.firstTokenMs).toEqual([ends[2], ends[0], ends[2]]);
    expect(tokenTimesMs(l.requests, 0)).toEqual([ends[2], ends[3], ends[4]]);
    expect(tokenTimesMs(l.requests, 1)).toEqual([ends[0], ends[1]]);
    expect(tokenTimesMs(l.requests, 2)).toEqual([ends[2], ends[3]]);
    expect(l.requests.finishMs).toEqual([ends[4], ends[1], ends[3]]);
    // Request 2 waits for rank 0's budget: admitted when step 2 begins, at the end of step 1.
    expect(l.requests.admittedMs).toEqual([0, 0, ends[1]]);
    expect(run.queueing.maxSteps).toBe(2);
    expect(l.prefillTokens).toBe(150);
  });

  it('accounts for every request: preempted ones recompute, one that can never fit is rejected, one that outgrows the pool is truncated', () => {
    // 8 usable blocks of 16 tokens (128 tokens): request 2's prompt of 200 never fits; request 0 outgrows the pool while decoding.
    const t = [req(0, 60, 100, [1]), req(0, 40, 10, [2]), req(0, 200, 5, [3]), req(0, 30, 4, [4])];
    const model = recording();
    const run = fleetSync({ trace: t, engine: 'vllm', engines: 1, numBlocks: 9, maxNumBatchedTokens: 64, timing: model });
    const l = run.latency!;
    expect(run.rejected).toBe(1);
    expect(run.truncated).toBe(1);
    expect(l.preemptions).toBeGreaterThan(0);
    expect(l.requests.outputTokens[2]).toBe(0);
    expect(l.requests.firstTokenMs[2]).toBeNull();
    expect(l.requests.outputTokens[0]).toBeLessThan(100);
    expect(l.requests.outputTokens[0]).toBeGreaterThan(0);
    expect([l.requests.outputTokens[1], l.requests.outputTokens[3]]).toEqual([10, 4]);
    for (let r = 0; r < t.length; r++) {
      expect(l.requests.finishMs[r]).not.toBeNull();
      expect(tokenTimesMs(l.requests, r)).toHaveLength(l.requests.outputTokens[r]!);
    }
    expect(run.engines[0]!.finishedEarly).toBe(1);
  });
});

describe('sloSearch', () => {
  it('searches the fewest vLLM engines meeting a target, each run a vLLM fleet', () => {
    const t = trace.slice(0, 120);
    const o: FleetOptions = { trace: t, engine: 'vllm', numBlocks: 8192, timing: true, speedup: 30, router: 'least-loaded' };
    const runs = [1, 2, 3].map((engines) => fleetSync({ ...o, engines }));
    const p99 = runs.map((r) => r.latency!.ttftMs.p99);
    expect(p99[2]).toBeLessThan(p99[0]!);
    // A target between the one-engine and the three-engine p99: the first count under it.
    const target = (p99[0]! + p99[2]!) / 2;
    const found = sloSearch(o, { ttftMs: target }, 3);
    const want = runs.findIndex((r) => r.latency!.ttftMs.p99 <= target && r.rejected + r.truncated === 0) + 1;
    expect(found.engines).toBe(want);
    expect(found.runs.every((r) => r.config.engine === 'vllm')).toBe(true);
  });
});

describe('options', () => {
  it("refuses what the vllm engine does not model, by name, with the reason, before anything runs", () => {
    const bad: Array<[FleetOptions, RegExp]> = [
      [{ engine: 'vllm', hostBlocks: 100 }, /options.hostBlocks cannot be used with engine 'vllm': the vllm engine does not model a host tier/],
      [{ engine: 'vllm', slidingWindow: 64 }, /options.slidingWindow cannot be used with engine 'vllm'/],
      [{ engine: 'vllm', linearStateSlots: 4 }, /options.linearStateSlots cannot be used with engine 'vllm'/],
      [{ engine: 'vllm', eviction: 'lfu' }, /options.eviction cannot be used with engine 'vllm': vLLM has one eviction order/],
      [{ engine: 'vllm', publishAfterPrefill: true }, /options.publishAfterPrefill cannot be used with engine 'vllm'/],
      [{ engine: 'vllm', threads: 2 }, /options.threads 2 cannot be used with engine 'vllm'/],
      [{ engine: 'vllm', scheduler: 'continuous' }, /options.scheduler "continuous" cannot be used with engine 'vllm'/],
      [{ engine: 'vllm', maxRunning: 8, maxNumSeqs: 16 }, /options.maxRunning and options.maxNumSeqs are one option/],
      [{ engine: 'vllm', maxNumBatchedTokens: 0 }, /options.maxNumBatchedTokens/],
      [{ longPrefillTokenThreshold: 64 }, /options.longPrefillTokenThreshold needs engine 'vllm'/],
      [{ engine: 'vlm' as 'vllm' }, /options.engine must be 'xllm' or 'vllm'/],
      [{ engine: 'vllm', speedup: 2 }, /options.speedup applies to a timed fleet: give options.timing \(true for the default model\)$/],
    ];
    for (const [o, msg] of bad) expect(() => new Fleet({ trace: [req(0, 16, 1, [1])], ...o }), JSON.stringify(o)).toThrow(msg);
    // A prompt of no token: vLLM computes one at least.
    expect(() => new Fleet({ trace: [req(0, 0, 1, [])], engine: 'vllm' })).toThrow(/trace request 0: inputLength/);
  });

  it('takes a token budget on the step clock, 8192 by default (vLLM\'s serving default)', () => {
    const f = fleetSync({ trace: [req(0, 16, 1, [1])], engine: 'vllm', engines: 1 });
    expect(f.config.maxNumBatchedTokens).toBe(8192);
    expect(f.config).not.toHaveProperty('stepMs', undefined);
    const g = fleetSync({ trace: [req(0, 16, 1, [1])], engine: 'vllm', engines: 1, maxNumBatchedTokens: 100 });
    expect(g.config.maxNumBatchedTokens).toBe(100);
  });

  it('sizes a vLLM engine\'s cache in GiB as an xllm engine\'s (kvCacheGib, gpuMemoryUtilization with a profile)', () => {
    const profile = { kind: 'profile', profile: 'rtxpro6000/llama-3.1-8b' } as const;
    const t = [req(0, 64, 2, [1])];
    for (const sizing of [{ gpuMemoryUtilization: 0.9 }, { kvCacheGib: 16 }]) {
      const v = fleetSync({ trace: t, engines: 1, engine: 'vllm', timing: profile, ...sizing });
      const x = fleetSync({ trace: t, engines: 1, timing: profile, ...sizing });
      expect(v.config.numBlocks).toBe(x.config.numBlocks);
      expect(v.config.kvGibPerEngine).toBe(x.config.kvGibPerEngine);
      expect((v.engines[0]!.run as VllmReplayRun).freeBlocksAtEnd + (v.engines[0]!.run as VllmReplayRun).cachedBlocksAtEnd).toBe(v.config.numBlocks - 1);
    }
    expect(() => fleetSync({ trace: t, engine: 'vllm', timing: profile, kvCacheGib: 16, numGpuBlocksOverride: 100 })).toThrow(/options.numBlocks and options.kvCacheGib both size the KV cache/);
  });

  it('an xllm fleet is what it always was: no engine field in its configuration', () => {
    const f = fleetSync({ trace: [req(0, 16, 1, [1])], engines: 1 });
    expect(f.config).not.toHaveProperty('engine');
    expect(f.config).toHaveProperty('eviction', 'lru');
    const g = fleetSync({ trace: [req(0, 16, 1, [1])], engines: 1, engine: 'xllm', maxNumSeqs: 8, numGpuBlocksOverride: 100 });
    expect(g.config).toMatchObject({ maxRunning: 8, numBlocks: 100 });
    expect(g.config).not.toHaveProperty('engine');
  });
});
