// The timed fleet never lies and never hangs (docs/fleet-time.md): every
// run ends with every request served, rejected or cut short; the figures
// count only what happened; the clock keeps time relative to the first
// arrival and refuses what it cannot represent; SLO targets are checked.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Fleet, fleetSync } from '../bindings/fleet/fleet.js';
import type { FleetOptions } from '../bindings/fleet/fleet-options.js';
import type { FleetRun } from '../bindings/fleet/fleet-result.js';
import { fewestMeeting, meetsSlo, sloSearch, type SloTargets } from '../bindings/fleet/slo-search.js';
import { tokenTimesMs } from '../bindings/fleet/fleet-latency.js';
import type { TraceRequest } from '../bindings/replay/trace.js';
import type { StepBatch, TimingModel } from '../bindings/timing/timing-model.js';
import { timingModel } from '../bindings/timing/timing-model.js';
import { countSteps } from './support/steps.js';
import { fleetSweep } from '../bindings/node/fleet-sweep.js';

function req(timestamp: number, L: number, O: number, ids: number[]): TraceRequest {
  return { timestamp, inputLength: L, outputLength: O, hashIds: Int32Array.from(ids) };
}

/**
 * The default model, refusing to step past `bound` steps: a run that does
 * not end fails the test instead of hanging it. It also checks that each
 * batch's per-sequence lists agree with its sums.
 */
function bounded(bound: number, dpRanks: number): TimingModel & { steps: number } {
  const inner = timingModel();
  const m = {
    name: 'bounded',
    steps: 0,
    stepMs(b: Readonly<StepBatch>): number {
      if (++m.steps > bound) throw new Error(`the run did not end within ${bound} steps`);
      const sum = (xs: readonly number[]) => xs.reduce((a, x) => a + x, 0);
      expect(b.chunkTokens.length).toBe(b.prefillSeqs);
      expect(b.chunkContextTokens.length).toBe(b.prefillSeqs);
      expect(b.chunkRanks.length).toBe(b.prefillSeqs);
      expect(sum(b.chunkTokens)).toBe(b.prefillTokens);
      expect(b.decodeContexts.length).toBe(b.decodeSeqs);
      expect(b.decodeRanks.length).toBe(b.decodeSeqs);
      expect(sum(b.decodeContexts)).toBe(b.decodeContextTokens);
      expect(b.dpRanks).toBe(dpRanks);
      for (const x of b.chunkTokens) expect(x).toBeGreaterThanOrEqual(0);
      for (const x of [...b.chunkRanks, ...b.decodeRanks]) expect(x >= 0 && x < dpRanks).toBe(true);
      return inner.stepMs(b);
    },
  };
  return m;
}

/** Runs a fleet, checks every engine's pool (a vLLM engine's every rank), and disposes of it. */
function runChecked(o: FleetOptions): FleetRun {
  const f = new Fleet(o);
  try {
    const run = f.run();
    for (let e = 0; e < run.config.engines; e++) {
      if (o.engine === 'vllm') for (const kv of f.vllmCaches(e)) kv.check();
      else f.pool(e).check();
    }
    return run;
  } finally {
    f.dispose();
  }
}

/** Every request is served (all its tokens), or counted as rejected, truncated or finished early; none vanishes. */
function expectAccounted(run: FleetRun, trace: readonly TraceRequest[]): void {
  const L = run.latency!;
  const { finishMs, outputTokens, firstTokenMs } = L.requests;
  let short = 0;
  for (let r = 0; r < trace.length; r++) {
    expect(finishMs[r], `request ${r} never finished`).not.toBeNull();
    const want = Math.max(trace[r]!.outputLength, 1);
    expect(outputTokens[r]!).toBeLessThanOrEqual(want);
    if (outputTokens[r]! < want) short++;
    expect(firstTokenMs[r] === null).toBe(outputTokens[r] === 0);
    expect(tokenTimesMs(L.requests, r)).toHaveLength(outputTokens[r]!);
  }
  const early = run.engines.reduce((a, e) => a + e.finishedEarly, 0);
  if (run.config.scheduler === 'continuous' || run.config.scheduler === 'vllm') expect(short).toBe(run.rejected + run.truncated);
  else {
    // The kernel may also finish a truncated request early.
    expect(short).toBeGreaterThanOrEqual(run.rejected + Math.max(run.truncated, early));
    expect(short).toBeLessThanOrEqual(run.rejected + run.truncated + early);
  }
  expect(L.completed).toBe(outputTokens.filter((k) => k > 0).length);
  // The engines' figures add up to their ranks' (prefix hits are no new blocks).
  for (const e of run.engines) expect(e.run.allocatedBlocks).toBe(e.run.ranks.reduce((a, x) => a + x.allocatedBlocks, 0));
}

describe('every run ends', () => {
  it("scheduler 'continuous': a recompute that outgrows its rank while another rank runs is truncated, not preempted forever (the issue's livelock)", () => {
    // 2 ranks of 63 blocks of 16 tokens, 15 tokens a step: 16 + 1000 tokens need 64 blocks, so do 900 + 300.
    const t = [req(0, 16, 1000, [1]), req(0, 900, 300, [2, 3])];
    const model = bounded(20_000, 2);
    const run = runChecked({ trace: t, engines: 1, dpSize: 2, numBlocks: 64, scheduler: 'continuous', maxNumBatchedTokens: 15, timing: model });
    expectAccounted(run, t);
    expect(run.truncated).toBe(2);
    // Each gave the tokens its rank holds: 63 blocks of 16 tokens, less its prompt.
    expect(run.latency!.requests.outputTokens[0]).toBe(63 * 16 - 16 + 1);
    expect(run.latency!.requests.outputTokens[1]).toBeGreaterThan(0);
  });

  it('a sweep with the livelock among its token budgets ends too, each fleet with its requests accounted for', async () => {
    const t = [req(0, 16, 1000, [1]), req(0, 900, 300, [2, 3])];
    const runs = await fleetSweep({ trace: t, dpSize: 2, numBlocks: 64, scheduler: 'continuous', workers: 1, grid: { maxNumBatchedTokens: [1, 15, 16], engines: [1] } });
    expect(runs.map((r) => r.config.maxNumBatchedTokens)).toEqual([1, 15, 16]);
    for (const r of runs) {
      expect(r.truncated).toBe(2);
      expect(r.latency!.requests.finishMs.every((f) => f !== null)).toBe(true);
    }
  }, 60_000);

  it("engine 'vllm': a prompt that outgrows the pool under a small budget, which vLLM preempts and recomputes forever, is dropped and the run ends", () => {
    // 49 prompt tokens on 12 usable blocks of 4 (48 tokens), 5 tokens a step (docs/engines.md, requests that can never fit).
    const t = [req(0, 49, 3, [1]), req(10, 8, 2, [2])];
    const model = bounded(1000, 1);
    const run = runChecked({ trace: t, engine: 'vllm', engines: 1, numBlocks: 13, blockSize: 4, maxNumBatchedTokens: 5, schedulerReserveFullIsl: false, timing: model });
    expectAccounted(run, t);
    expect(run.rejected).toBe(1);
    expect(run.latency!.requests.outputTokens).toEqual([0, 2]);
    expect(run.latency!.preemptions).toBeGreaterThan(0);
  });

  it('random small pools, token budgets from 1 up, dp ranks and the host tier, all three engines: every run ends with every request accounted for', () => {
    const request = fc.record({
      gap: fc.integer({ min: 0, max: 200 }),
      L: fc.integer({ min: 0, max: 160 }),
      O: fc.integer({ min: 0, max: 60 }),
      id: fc.integer({ min: 1, max: 3 }),
    });
    fc.assert(
      fc.property(
        fc.array(request, { minLength: 1, maxLength: 10 }),
        fc.record({
          engines: fc.integer({ min: 1, max: 2 }),
          blockSize: fc.constantFrom(4, 16),
          numBlocks: fc.integer({ min: 3, max: 40 }),
          dpSize: fc.integer({ min: 1, max: 3 }),
          maxRunning: fc.integer({ min: 1, max: 5 }),
          scheduler: fc.constantFrom('xllm' as const, 'continuous' as const, 'vllm' as const),
          budget: fc.oneof(fc.integer({ min: 1, max: 20 }), fc.integer({ min: 1, max: 400 })),
          threshold: fc.constantFrom(0, 0, 3, 32),
          reserve: fc.boolean(),
          router: fc.constantFrom('round-robin' as const, 'least-loaded' as const, 'precise-prefix' as const),
          concurrency: fc.constantFrom(0, 0, 2),
          hostBlocks: fc.constantFrom(0, 0, 8, 64),
        }),
        (reqs, c) => {
          let ts = 0;
          const vllm = c.scheduler === 'vllm';
          // vLLM computes a token of every prompt at least (engine 'vllm' refuses an empty one).
          const t = reqs.map((q) => req((ts += q.gap), vllm ? Math.max(q.L, 1) : q.L, q.O, [q.id]));
          // Each step computes a token of the oldest running sequence (or admits, rejects or truncates one): a generous bound.
          // vLLM may preempt its oldest alone and compute it again, each time further (or drop it): a square of its tokens.
          const bound = vllm
            ? t.reduce((a, q) => a + (q.inputLength + q.outputLength + 2) ** 2, 0) + 16
            : 2 * t.reduce((a, q) => a + q.inputLength + q.outputLength + 2, 0) + 16;
          const model = bounded(bound, c.dpSize);
          const o: FleetOptions = {
            trace: t, engines: c.engines, blockSize: c.blockSize, numBlocks: c.numBlocks, dpSize: c.dpSize, maxRunning: c.maxRunning, router: c.router,
            timing: model,
            ...(vllm
              ? { engine: 'vllm' as const, maxNumBatchedTokens: c.budget, longPrefillTokenThreshold: c.threshold, schedulerReserveFullIsl: c.reserve }
              : { scheduler: c.scheduler as 'xllm' | 'continuous', ...(c.scheduler === 'continuous' && { maxNumBatchedTokens: c.budget }), ...(c.hostBlocks > 0 && { hostBlocks: c.hostBlocks }) }),
            ...(c.concurrency > 0 && { concurrency: c.concurrency }),
          };
          const run = runChecked(o);
          countSteps(model.steps);
          expectAccounted(run, t);
        },
      ),
      { numRuns: 400 },
    );
  });
});

describe("scheduler 'continuous' publishes and counts what happened", () => {
  it('publishes a prompt as soon as its prefill is whole: a second prompt sharing its first 512 tokens 500 ms later finds 32 blocks', () => {
    // The first request still decodes when the second arrives.
    const t = [req(0, 1024, 2000, [1, 2]), req(500, 1024, 10, [1, 3])];
    const run = runChecked({ trace: t, engines: 1, scheduler: 'continuous' });
    expect(run.latency!.requests.firstTokenMs[0]!).toBeLessThan(500);
    expect(run.matchedBlocks).toBe(32);
  });

  it('folds only the ids it hands out into the checksum, as the kernel does: sequential requests give the ids xllm gives', () => {
    // The same prompt twice, far apart: the second finds 63 of its 64 blocks cached.
    const t = [req(0, 1024, 40, [1, 2]), req(100_000, 1024, 40, [1, 2]), req(200_000, 100, 3, [5])];
    const cont = runChecked({ trace: t, engines: 1, scheduler: 'continuous', maxNumBatchedTokens: 4096 });
    const xllm = runChecked({ trace: t, engines: 1, timing: true });
    expect(cont.matchedBlocks).toBe(63);
    const e = cont.engines[0]!.run;
    expect(e.allocatedBlocks).toBe(e.ranks[0]!.allocatedBlocks);
    expect({ allocated: e.allocatedBlocks, checksum: e.idChecksum }).toEqual({ allocated: xllm.engines[0]!.run.allocatedBlocks, checksum: xllm.engines[0]!.run.idChecksum });
  });

  it('gives an empty prompt its first token at the end of its admission step, as xllm does', () => {
    const t = [req(0, 0, 3, []), req(0, 20, 2, [1])];
    const times = (scheduler: 'xllm' | 'continuous') => fleetSync({ trace: t, engines: 1, scheduler, timing: { name: 'ten', stepMs: () => 10 } }).latency!.requests;
    expect(times('continuous')).toEqual(times('xllm'));
    expect(times('continuous').firstTokenMs).toEqual([10, 10]);
  });

  it('names the bad request in its errors, as the step clock does', () => {
    const t = [req(0, 64, 2, [1]), req(0, 64, 2, [1]), req(0, 64, 2, [1]), req(0, 64, 2, [1]), req(0, 64, 2, [1]), req(0, 1200, 2, [1])];
    for (const scheduler of ['xllm', 'continuous'] as const) {
      for (const router of ['round-robin', 'precise-prefix'] as const) {
        expect(() => fleetSync({ trace: t, engines: 1, timing: true, scheduler, router })).toThrow(new RangeError('trace[5].hashIds has 1 ids but inputLength 1200 needs 3'));
      }
    }
    expect(() => fleetSync({ trace: t, engines: 1, router: 'precise-prefix' })).toThrow(new RangeError('trace[5].hashIds has 1 ids but inputLength 1200 needs 3'));
  });
});

describe("scheduler 'xllm' counts what happened", () => {
  it('does not count the step in flight at arrival as queueing', () => {
    // Request 1 arrives during request 0's first step and is admitted in the next one: 0 steps of queueing.
    const run = fleetSync({ trace: [req(0, 64, 10, [1]), req(5, 64, 2, [2])], engines: 1, timing: { name: 'ten', stepMs: () => 10 } });
    expect(run.queueing).toEqual({ meanSteps: 0, p50Steps: 0, p99Steps: 0, maxSteps: 0 });
    expect(run.latency!.requests.admittedMs).toEqual([0, 10]);
  });

  it('a truncated request gives only the tokens it decoded, and stops decoding there', () => {
    const batches: number[] = [];
    const model: TimingModel = { name: 'ten', stepMs: (b) => (batches.push(b.decodeSeqs), 10) };
    // 3 usable blocks: the kernel decodes 32 of the 40 outputs (16 + 33 tokens need a fourth block).
    const run = runChecked({ trace: [req(0, 16, 40, [1])], engines: 1, numBlocks: 4, timing: model });
    expect(run.truncated).toBe(1);
    const l = run.latency!;
    expect(l.requests.outputTokens).toEqual([32]);
    expect(l.outputTokens).toBe(32);
    expect(l.requests.finishMs).toEqual([320]);
    expect(l.engines[0]).toMatchObject({ steps: 32, busyMs: 320 });
    expect(batches).toEqual([0, ...Array<number>(31).fill(1)]);
    expect(l.itlMs).toMatchObject({ count: 31, max: 10 });
    expect(l.outputTokensPerSecond).toBe(100);
  });

  it('a request truncated before its first token computes nothing and gives nothing', () => {
    // 16 prompt tokens fill the one usable block; output 0 needs a second.
    const batches: Array<[number, number]> = [];
    const model: TimingModel = { name: 'ten', stepMs: (b) => (batches.push([b.prefillTokens, b.decodeSeqs]), 10) };
    const run = runChecked({ trace: [req(0, 16, 5, [1])], engines: 1, numBlocks: 2, timing: model });
    expect(run.truncated).toBe(1);
    expect(run.latency!.requests.outputTokens).toEqual([0]);
    expect(run.latency!.requests.finishMs).toEqual([0]);
    expect(run.latency!.completed).toBe(0);
    // The step that admitted it computed nothing.
    expect(batches).toEqual([[0, 0]]);
  });
});

describe('the clock', () => {
  const model: TimingModel = { name: 'two-costs', stepMs: (b) => (b.prefillSeqs > 0 ? 11.02 : 5.052) };

  it('keeps time relative to the first arrival: timestamps near 2^53 ms keep their fractions of a millisecond', () => {
    for (const origin of [1.7e15, 0]) {
      const run = fleetSync({ trace: [req(origin, 64, 3, [1])], engines: 1, timing: model });
      expect(run.latency!.ttftMs.max).toBe(11.02);
      expect(run.latency!.itlMs).toMatchObject({ count: 2, mean: 5.052, max: 5.052 });
      expect(run.latency!.requests.arrivalMs).toEqual([0]);
      expect(run.latency!.originMs).toBe(origin);
    }
  });

  it('refuses a clock that cannot represent an event, rather than losing requests', () => {
    const t = [req(0, 64, 10, [1]), req(1000, 64, 2, [2])];
    expect(() => fleetSync({ trace: t, engines: 1, timing: true, speedup: 1e-300 })).toThrow(/^options.speedup 1e-300: trace\[1\] would arrive 1e\+303 ms after the first request/);
    expect(() => fleetSync({ trace: t, engines: 1, timing: { kind: 'polynomial', baseMs: 1e308 } })).toThrow(
      /^timing model polynomial sha256:[0-9a-f]+ answered 1e\+308 ms for a step beginning at 0 ms .*past the clock's range of 2\^53 - 1 ms/,
    );
    expect(() => fleetSync({ trace: t, engines: 1, scheduler: 'continuous', timing: { name: 'huge', stepMs: () => 2 ** 52 } })).toThrow(RangeError);
    expect(() => fleetSync({ trace: t, engines: 1, timing: true, speedup: 1e-12 })).not.toThrow();
  });
});

describe('SLO targets are checked wherever they are used', () => {
  const run = fleetSync({ trace: [req(0, 64, 10, [1])], engines: 1, timing: true });

  it('refuses unknown, missing and non-numeric targets in meetsSlo and fewestMeeting, as sloSearch does', () => {
    const bad: Array<[unknown, RegExp, typeof Error]> = [
      [{ ttfMs: 1 }, /^slo: unknown target "ttfMs" \(ttftMs, tpotMs, itlMs\)$/, RangeError],
      [{}, /^slo: give at least one target/, RangeError],
      [5, /^slo must be an object, got 5$/, TypeError],
      ['ttftMs', /^slo must be an object, got "ttftMs"$/, TypeError],
      [null, /^slo must be an object, got null$/, TypeError],
      [[], /^slo must be an object of targets/, TypeError],
      [{ ttftMs: '1e9' }, /^slo.ttftMs must be a number of ms, got "1e9"$/, TypeError],
      [{ tpotMs: -1 }, /^slo.tpotMs must be a finite number > 0, got -1$/, RangeError],
      [{ itlMs: Infinity }, /^slo.itlMs must be a finite number > 0, got Infinity$/, RangeError],
    ];
    for (const [slo, msg, kind] of bad) {
      expect(() => meetsSlo(run, slo as SloTargets)).toThrow(kind);
      expect(() => meetsSlo(run, slo as SloTargets)).toThrow(msg);
      expect(() => fewestMeeting([run], slo as SloTargets)).toThrow(msg);
      expect(() => fewestMeeting([], slo as SloTargets)).toThrow(msg);
      expect(() => sloSearch({ trace: [req(0, 64, 10, [1])], timing: true }, slo as SloTargets, 1)).toThrow(msg);
    }
  });

  it('judges TTFT, TPOT and ITL each against its own p99', () => {
    const l = run.latency!;
    expect(meetsSlo(run, { ttftMs: l.ttftMs.p99 })).toBe(true);
    expect(meetsSlo(run, { ttftMs: l.ttftMs.p99 - 0.001 })).toBe(false);
    expect(meetsSlo(run, { tpotMs: l.tpotMs.p99 })).toBe(true);
    expect(meetsSlo(run, { tpotMs: l.tpotMs.p99 - 0.001 })).toBe(false);
    expect(meetsSlo(run, { itlMs: l.itlMs.p99 })).toBe(true);
    expect(meetsSlo(run, { itlMs: l.itlMs.p99 - 0.001 })).toBe(false);
    expect(fewestMeeting([run], { ttftMs: 1e9, tpotMs: 1e9, itlMs: 1e9 })).toBe(run);
  });
});
