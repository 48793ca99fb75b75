// The timed fleet (docs/fleet-time.md): the 'xllm' scheduler keeps the
// step clock's cache results exactly; hand-made traces give the times the
// rules say; and on random traces and pools both schedulers keep every
// request's clock in order, give every token, lose no block and repeat
// themselves exactly.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Fleet, fleetSync } from '../bindings/fleet/fleet.js';
import type { FleetOptions } from '../bindings/fleet/fleet-options.js';
import { arrivalOrigin, arrivalTimes } from '../bindings/fleet/timed-fleet.js';
import { hashBlocks } from '../bindings/hash.js';
import { readTraceFile } from '../bindings/node/trace-file.js';
import { outputToken, promptTokens } from '../bindings/replay/kernel.js';
import type { TraceRequest } from '../bindings/replay/trace.js';
import type { StepBatch, TimingModel } from '../bindings/timing/timing-model.js';
import { TRACE_PATH } from './support/externals.js';
import { figures } from './support/replay-figures.js';

const trace = await readTraceFile(TRACE_PATH, 300);

function req(timestamp: number, L: number, O: number, ids: number[]): TraceRequest {
  return { timestamp, inputLength: L, outputLength: O, hashIds: Int32Array.from(ids) };
}

/** A copy of a batch: the engines reuse its arrays from step to step. */
function copyBatch(b: Readonly<StepBatch>): StepBatch {
  return {
    ...b, chunkTokens: [...b.chunkTokens], chunkContextTokens: [...b.chunkContextTokens], decodeContexts: [...b.decodeContexts],
    chunkRanks: [...b.chunkRanks], decodeRanks: [...b.decodeRanks],
  };
}

/** Every step takes `ms`; the batches are kept for the test to read. */
function fixed(ms: number): TimingModel & { batches: StepBatch[] } {
  const batches: StepBatch[] = [];
  return { name: `fixed-${ms}`, batches, stepMs: (b) => (batches.push(copyBatch(b)), ms) };
}

/** Runs a fleet, checks every engine's pool, and disposes of it. */
function runChecked(o: FleetOptions) {
  const f = new Fleet(o);
  try {
    const run = f.run();
    for (let e = 0; e < run.config.engines; e++) f.pool(e).check();
    return run;
  } finally {
    f.dispose();
  }
}

describe("scheduler 'xllm' on the millisecond clock", () => {
  it('keeps the step clock\'s ids, hits and evictions when every engine is busy from the start (instant arrivals, round-robin)', () => {
    const o: FleetOptions = { trace, engines: 3, arrival: 'instant', numBlocks: 4096 };
    const steps = fleetSync(o);
    const timed = fleetSync({ ...o, timing: true });
    expect(steps.evictedBlocks).toBeGreaterThan(0);
    expect(timed.engines.map((e) => figures(e.run))).toEqual(steps.engines.map((e) => figures(e.run)));
    expect(timed.queueing).toEqual(steps.queueing);
    expect(timed.latency!.scheduler).toBe('xllm');
    // Rejected requests give no token, nor those the kernel finished to make room in their own admission step.
    const none = timed.latency!.requests.outputTokens.filter((k) => k === 0).length;
    expect(none).toBeGreaterThanOrEqual(steps.rejected);
    expect(timed.latency!.completed).toBe(steps.requests - none);
  });

  it('gives the times a hand-made trace gives: a step per token, the first with the prefill', () => {
    const m = fixed(10);
    // One slot: the second request waits for the first to finish its three tokens.
    const run = fleetSync({ trace: [req(0, 64, 3, [1]), req(5, 64, 2, [2])], engines: 1, maxRunning: 1, timing: m });
    const t = run.latency!.requests;
    expect(t.arrivalMs).toEqual([0, 5]);
    expect(t.firstTokenMs).toEqual([10, 40]);
    expect(t.finishMs).toEqual([30, 50]);
    expect(t.admittedMs).toEqual([0, 30]);
    expect(t.outputTokens).toEqual([3, 2]);
    expect(run.latency!.ttftMs).toMatchObject({ count: 2, mean: 22.5, max: 35 });
    // TPOT per request, ITL per gap: 2 + 1 gaps of one step each.
    expect(run.latency!.tpotMs).toMatchObject({ count: 2, mean: 10, max: 10 });
    expect(run.latency!.itlMs).toMatchObject({ count: 3, mean: 10, max: 10 });
    expect(run.latency!.durationMs).toBe(50);
    expect(m.batches.map((b) => [b.prefillTokens, b.prefillSeqs, b.decodeSeqs, b.decodeContextTokens])).toEqual([
      [64, 1, 0, 0], [0, 0, 1, 65], [0, 0, 1, 66], [64, 1, 0, 0], [0, 0, 1, 65],
    ]);
    expect(run.latency!.engines[0]).toMatchObject({ steps: 5, busyMs: 50, utilisation: 1 });
  });

  it('lists a step\'s decodes in admission order (the kernel\'s running FIFO), whoever finished before them', () => {
    const m = fixed(1);
    // Four requests admitted in step 0; the second gives its last token at the end of step 1.
    fleetSync({ trace: [req(0, 10, 6, [1]), req(0, 20, 2, [2]), req(0, 30, 6, [3]), req(0, 40, 6, [4])], engines: 1, timing: m });
    expect(m.batches.slice(1, 4).map((b) => b.decodeContexts)).toEqual([[11, 21, 31, 41], [12, 32, 42], [13, 33, 43]]);
  });

  it('charges only the prompt tokens the prefix cache does not hold', () => {
    const m = fixed(1);
    // The same 1,024-token prompt twice: the second finds 1,008 tokens cached (the last block is recomputed).
    fleetSync({ trace: [req(0, 1024, 1, [7, 8]), req(100, 1024, 1, [7, 8])], engines: 1, timing: m });
    expect(m.batches.map((b) => [b.prefillTokens, b.cachedTokens])).toEqual([[1024, 0], [16, 1008]]);
  });
});

describe("scheduler 'continuous'", () => {
  it('chunks a prefill by the token budget and decodes beside it', () => {
    const m = fixed(10);
    const run = fleetSync({ trace: [req(0, 100, 2, [1]), req(0, 30, 3, [2])], engines: 1, scheduler: 'continuous', maxNumBatchedTokens: 40, timing: m });
    // Budget 40: the first prompt takes steps 0-2 (40, 40, 20), the second starts beside its last chunk,
    // and finishes its prefill beside the first one's decode.
    expect(m.batches.map((b) => [b.prefillTokens, b.prefillSeqs, b.decodeSeqs, b.decodeContextTokens])).toEqual([
      [40, 1, 0, 0], [40, 1, 0, 0], [40, 2, 0, 0], [10, 1, 1, 101], [0, 0, 1, 31], [0, 0, 1, 32],
    ]);
    const t = run.latency!.requests;
    expect(t.outputTokens).toEqual([2, 3]);
    expect(t.admittedMs).toEqual([0, 20]);
    expect(t.firstTokenMs).toEqual([30, 40]);
    expect(t.finishMs).toEqual([40, 60]);
  });
});

describe("scheduler 'continuous' under memory pressure", () => {
  it('preempts the latest sequence when blocks run out, recomputes it, and every request still gives all its tokens', () => {
    // 11 usable blocks of 16 tokens; four requests of 32 + 60 tokens need 6 each.
    const t = [1, 2, 3, 4].map((id) => req(0, 32, 60, [id]));
    const run = runChecked({ trace: t, engines: 1, numBlocks: 12, maxRunning: 4, scheduler: 'continuous' });
    expect(run.latency!.preemptions).toBeGreaterThan(0);
    expect(run.latency!.requests.outputTokens).toEqual([60, 60, 60, 60]);
    expect(run.rejected + run.truncated).toBe(0);
    // Recomputing costs prefill: more prompt tokens are computed than the four prompts hold, less what the cache gave back.
    expect(run.latency!.prefillTokens + run.latency!.cachedTokens).toBeGreaterThan(4 * 32);
  });

  it('rejects a prompt larger than a rank and truncates an output that outgrows it, and goes on', () => {
    const t = [req(0, 400, 1, [1]), req(0, 32, 300, [2]), req(0, 32, 2, [3])];
    const run = runChecked({ trace: t, engines: 1, numBlocks: 12, scheduler: 'continuous' });
    expect(run.rejected).toBe(1);
    expect(run.truncated).toBe(1);
    const k = run.latency!.requests.outputTokens;
    expect(k[0]).toBe(0);
    expect(k[1]).toBeGreaterThan(0);
    expect(k[1]).toBeLessThan(300);
    expect(k[2]).toBe(2);
  });
});

describe('arrivals', () => {
  it('open loop: a timestamp divided by the speed-up, never before the previous arrival, counted from the first arrival', () => {
    const t = [req(100, 1, 1, [1]), req(50, 1, 1, [1]), { inputLength: 1, outputLength: 1, hashIds: Int32Array.of(1) }, req(400, 1, 1, [1])];
    expect(Array.from(arrivalTimes(t, 4, 4, false))).toEqual([0, 0, 0, 75]);
    expect(arrivalOrigin(t, 4, 4, false)).toBe(25);
    expect(Array.from(arrivalTimes([req(100, 1, 1, [1]), req(300, 1, 1, [1])], 2, 1, true))).toEqual([0, 0]);
    expect(arrivalOrigin([req(100, 1, 1, [1])], 1, 1, true)).toBe(0);
    // Without a timestamp the first request arrives at the trace's 0.
    expect(arrivalOrigin([{ inputLength: 1, outputLength: 1, hashIds: Int32Array.of(1) }, req(300, 1, 1, [1])], 2, 2, false)).toBe(0);
    const run = fleetSync({ trace: trace.slice(0, 50), engines: 2, timing: true, speedup: 8 });
    expect(run.latency!.requests.arrivalMs.slice(0, 10)).toEqual(Array.from(arrivalTimes(trace, 10, 8, false)));
    expect(run.latency!.originMs).toBe(trace[0]!.timestamp! / 8);
  });

  it('closed loop: never more requests in flight than the concurrency, each arriving as one finishes', () => {
    for (const scheduler of ['xllm', 'continuous'] as const) {
      const run = fleetSync({ trace: trace.slice(0, 60), engines: 2, timing: true, scheduler, concurrency: 5 });
      const { arrivalMs, finishMs } = run.latency!.requests;
      for (let r = 0; r < arrivalMs.length; r++) {
        const now = arrivalMs[r]!;
        const inFlight = arrivalMs.filter((a, q) => q < r && a <= now && finishMs[q]! > now).length;
        expect(inFlight).toBeLessThan(5);
      }
      // The first five arrive at once; the sixth when the first of them finishes.
      expect(arrivalMs.slice(0, 5)).toEqual([0, 0, 0, 0, 0]);
      expect(arrivalMs[5]).toBe(Math.min(...finishMs.slice(0, 5).map((x) => x!)));
    }
  });
});

describe('options of a timed fleet', () => {
  it('refuses what does not apply, naming the option', () => {
    expect(() => fleetSync({ speedup: 2 })).toThrow(/options.speedup applies to a timed fleet/);
    expect(() => fleetSync({ timing: true, maxNumBatchedTokens: 100 })).toThrow(/maxNumBatchedTokens applies to scheduler 'continuous'/);
    expect(() => fleetSync({ timing: true, stepMs: 5 })).toThrow(/stepMs belongs to the step clock/);
    expect(() => fleetSync({ timing: true, concurrency: 4, arrival: 'instant' })).toThrow(/options.arrival applies to open-loop/);
    expect(() => fleetSync({ scheduler: 'fifo' as never })).toThrow(/options.scheduler must be one of xllm, continuous/);
    expect(() => fleetSync({ timing: true, speedup: 0 })).toThrow(/options.speedup must be a finite number > 0/);
    expect(() => fleetSync({ scheduler: 'continuous', slidingWindow: 64 })).toThrow(/slidingWindow and linearStateSlots need scheduler 'xllm'/);
    expect(() => fleetSync({ timing: { kind: 'polynomial', baseMs: -1 } })).toThrow(/timing.baseMs must be a finite number >= 0/);
    const bad: TimingModel = { name: 'bad', stepMs: () => NaN };
    expect(() => fleetSync({ requests: 5, timing: bad })).toThrow(/timing model bad answered NaN ms/);
  });

  it('echoes the timed options in the configuration, and leaves the step clock\'s result as it was', () => {
    const run = fleetSync({ requests: 20, scheduler: 'continuous', maxNumBatchedTokens: 512, concurrency: 3 });
    expect(run.config).toMatchObject({ timing: 'polynomial', scheduler: 'continuous', maxNumBatchedTokens: 512, speedup: 1, concurrency: 3 });
    const plain = fleetSync({ requests: 20 });
    expect(plain.latency).toBeUndefined();
    expect(Object.keys(plain.config)).not.toContain('scheduler');
  });
});

describe('random traces and pools, both schedulers', () => {
  const request = fc.record({
    gap: fc.integer({ min: 0, max: 400 }),
    L: fc.integer({ min: 1, max: 300 }),
    O: fc.integer({ min: 0, max: 50 }),
    id: fc.integer({ min: 1, max: 4 }),
  });
  it('keeps each request\'s clock in order, gives every token it can, repeats itself exactly, and leaves every pool consistent', () => {
    fc.assert(
      fc.property(
        fc.array(request, { minLength: 1, maxLength: 24 }),
        fc.record({
          engines: fc.integer({ min: 1, max: 3 }),
          numBlocks: fc.integer({ min: 8, max: 80 }),
          maxRunning: fc.integer({ min: 1, max: 6 }),
          scheduler: fc.constantFrom('xllm' as const, 'continuous' as const),
          budget: fc.integer({ min: 8, max: 300 }),
          router: fc.constantFrom('round-robin' as const, 'least-loaded' as const, 'precise-prefix' as const),
          concurrency: fc.integer({ min: 0, max: 4 }),
          hostBlocks: fc.constantFrom(0, 0, 128),
        }),
        (reqs, c) => {
          let ts = 0;
          const t = reqs.map((q) => req((ts += q.gap), q.L, q.O, [q.id]));
          const o: FleetOptions = {
            trace: t, engines: c.engines, numBlocks: c.numBlocks, maxRunning: c.maxRunning, router: c.router, timing: true, scheduler: c.scheduler,
            ...(c.scheduler === 'continuous' && { maxNumBatchedTokens: c.budget }), ...(c.concurrency > 0 && { concurrency: c.concurrency }),
            ...(c.hostBlocks > 0 && { hostBlocks: c.hostBlocks }),
          };
          const run = runChecked(o);
          const again = runChecked(o);
          expect(again.latency).toEqual(run.latency);
          expect(again.engines.map((e) => figures(e.run))).toEqual(run.engines.map((e) => figures(e.run)));
          const L = run.latency!;
          const { arrivalMs, admittedMs, firstTokenMs, finishMs, outputTokens } = L.requests;
          let short = 0;
          for (let r = 0; r < t.length; r++) {
            expect(finishMs[r]).not.toBeNull();
            expect(admittedMs[r]!).toBeGreaterThanOrEqual(arrivalMs[r]!);
            if (firstTokenMs[r] !== null) {
              expect(firstTokenMs[r]!).toBeGreaterThan(admittedMs[r]!);
              expect(finishMs[r]!).toBeGreaterThanOrEqual(firstTokenMs[r]!);
            }
            expect(outputTokens[r]!).toBeLessThanOrEqual(Math.max(t[r]!.outputLength, 1));
            if (outputTokens[r]! < Math.max(t[r]!.outputLength, 1)) short++;
          }
          expect(L.outputTokens).toBe(outputTokens.reduce((a, b) => a + b, 0));
          // Token steps are runs of consecutive steps, each starting after a step that gave the request no token.
          for (let r = 0; r < t.length; r++) {
            const runs = L.requests.tokenSteps[r]!;
            let count = 0;
            for (let i = 0; i < runs.length; i += 2) {
              expect(runs[i + 1]!).toBeGreaterThan(0);
              if (i > 0) expect(runs[i]!).toBeGreaterThan(runs[i - 2]! + runs[i - 1]!);
              count += runs[i + 1]!;
            }
            expect(count).toBe(outputTokens[r]);
          }
          // Requests that gave fewer tokens: rejected, truncated, or (xllm) finished by the kernel to make room (a truncated one may be too).
          if (c.scheduler === 'continuous') expect(short).toBe(run.rejected + run.truncated);
          else {
            const early = run.engines.reduce((a, e) => a + e.finishedEarly, 0);
            expect(short).toBeGreaterThanOrEqual(run.rejected + Math.max(run.truncated, early));
            expect(short).toBeLessThanOrEqual(run.rejected + run.truncated + early);
          }
          for (const e of L.engines) expect(e.utilisation).toBeLessThanOrEqual(1);
          if (L.outputTokens > 0) expect(L.engines.reduce((a, e) => a + e.busyMs, 0)).toBeGreaterThan(0);
        },
      ),
      { numRuns: 150 },
    );
  });
});

describe('the host tier on the millisecond clock', () => {
  for (const scheduler of ['xllm', 'continuous'] as const) {
    it(`charges the blocks it loads back to the device, and does not compute them again (${scheduler})`, () => {
      const m = fixed(1);
      // A small device cache: the first prompts are offloaded to the host by the ones after, and found there when they come back.
      const t = [1, 2, 3, 4, 1, 2, 3, 4].map((id, i) => req(i * 1000, 512, 4, [id]));
      const run = runChecked({ trace: t, engines: 1, numBlocks: 80, hostBlocks: 512, timing: m, scheduler });
      const loaded = (run.engines[0]!.run as { hostTier?: { blocksLoaded: number } }).hostTier!.blocksLoaded;
      expect(loaded).toBeGreaterThan(0);
      expect(run.latency!.hostLoadedBlocks).toBe(loaded);
      expect(m.batches.reduce((a, b) => a + b.hostLoadedBlocks, 0)).toBe(loaded);
      // What the host gives back is copied, not computed: each returning prompt computes only its last
      // block (the exact-prompt rule leaves it), after 31 loaded ones that count as cached.
      const back = m.batches.filter((b) => b.hostLoadedBlocks > 0);
      expect(back.map((b) => [b.hostLoadedBlocks, b.chunkTokens, b.chunkContextTokens, b.cachedTokens])).toEqual([1, 2, 3, 4].map(() => [31, [16], [496], 496]));
      // The default model turns those loads into time: the same run takes longer with a slower host link.
      const fast = fleetSync({ trace: t, engines: 1, numBlocks: 80, hostBlocks: 512, timing: { kind: 'polynomial', hostGBps: 1000 }, scheduler });
      const slow = fleetSync({ trace: t, engines: 1, numBlocks: 80, hostBlocks: 512, timing: { kind: 'polynomial', hostGBps: 1 }, scheduler });
      expect(slow.latency!.engines[0]!.busyMs).toBeGreaterThan(fast.latency!.engines[0]!.busyMs);
    });

    it(`prefetches from a KV-cache store behind the host what the host lost (${scheduler})`, () => {
      // A host of 39 usable blocks keeps only the prompt offloaded last; the store keeps all four, and each returning prompt is prefetched from it.
      const t = [1, 2, 3, 4, 1, 2, 3, 4].map((id, i) => req(i * 1000, 512, 4, [id]));
      const o: FleetOptions = { trace: t, engines: 1, numBlocks: 80, hostBlocks: 40, timing: fixed(1), scheduler };
      const hostOnly = fleetSync(o);
      const stored = fleetSync({ ...o, storeBlocks: 1000 });
      const tier = (r: typeof stored) => (r.engines[0]!.run as { hostTier: { blocksLoaded: number; store?: { blocksRequested: number; blocksDelivered: number } } }).hostTier;
      expect(tier(hostOnly).blocksLoaded).toBe(0);
      expect(tier(stored).store!.blocksRequested).toBeGreaterThan(0);
      expect(tier(stored).store!.blocksDelivered).toBe(4 * 31);
      expect(tier(stored).blocksLoaded).toBe(4 * 31);
      expect(stored.latency!.prefillTokens).toBe(hostOnly.latency!.prefillTokens - 4 * 31 * 16);
    });
  }
});

describe("the 'priority' policy under scheduler 'continuous'", () => {
  // The priority replay marks every block that holds a request's generated tokens with priority 10
  // (docs/replay.md). A preempted request recomputes a prompt that holds the tokens it gave: those
  // are still generated tokens, and the blocks it caches of them must be evicted first as well.
  it('marks a recomputed request\'s earlier outputs as generated tokens: they are evicted before every prompt block', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ gap: fc.integer({ min: 0, max: 20 }), L: fc.integer({ min: 4, max: 24 }), O: fc.integer({ min: 8, max: 40 }), id: fc.integer({ min: 1, max: 3 }) }), { minLength: 2, maxLength: 6 }),
        fc.record({ numBlocks: fc.integer({ min: 8, max: 20 }), maxRunning: fc.integer({ min: 2, max: 4 }), budget: fc.integer({ min: 4, max: 64 }) }),
        (reqs, c) => {
          const B = 4;
          let ts = 0;
          const t = reqs.map((q) => req((ts += q.gap), q.L, q.O, [q.id]));
          // Each block key of each request's whole token list: does the block hold a generated token?
          const generated = new Map<string, boolean>();
          t.forEach((q, r) => {
            const tokens = new Int32Array(q.inputLength + q.outputLength);
            tokens.set(promptTokens(q));
            for (let i = 0; i < q.outputLength; i++) tokens[q.inputLength + i] = outputToken(r, i);
            const keys = hashBlocks(tokens, B);
            for (let b = 0; b * 16 < keys.length; b++) generated.set(Buffer.from(keys.subarray(b * 16, b * 16 + 16)).toString('hex'), (b + 1) * B > q.inputLength);
          });
          const f = new Fleet({ trace: t, engines: 1, blockSize: B, numBlocks: c.numBlocks, maxRunning: c.maxRunning, scheduler: 'continuous', maxNumBatchedTokens: c.budget, eviction: 'priority', timing: fixed(1) });
          try {
            f.run();
            const m = f.pool(0).kvManager(0);
            // The eviction order: priority 10 first, then the prompt blocks at 35.
            const order = Array.from(m.lruOrder(), (id) => generated.get(Buffer.from(m.blockHash(id)!).toString('hex')));
            const firstPrompt = order.indexOf(false);
            if (firstPrompt >= 0) expect(order.slice(firstPrompt)).not.toContain(true);
          } finally {
            f.dispose();
          }
        },
      ),
      { numRuns: 120 },
    );
  });
});
