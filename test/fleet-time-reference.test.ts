// docs/fleet-time.md is precise enough to reimplement: a second timed
// fleet written from the page alone (test/support/timed-fleet-reference.ts)
// gives every request the same arrival, admission, token times and finish
// as fleet(), and every engine the same steps, on random traces and pools,
// schedulers 'xllm' and 'continuous' and engine 'vllm', open and closed
// loops, one or two dp ranks.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fleetSync } from '../bindings/fleet/fleet.js';
import { tokenTimesMs } from '../bindings/fleet/fleet-latency.js';
import type { TraceRequest } from '../bindings/replay/trace.js';
import type { StepBatch } from '../bindings/timing/timing-model.js';
import { referenceTimedFleet, type ReferenceOptions } from './support/timed-fleet-reference.js';
import { countSteps } from './support/steps.js';

/** A model that reads every part of the batch (sums and lists), in no particular order. */
function stepMs(b: StepBatch): number {
  let attention = 0;
  for (let i = 0; i < b.prefillSeqs; i++) attention += b.chunkTokens[i]! * (b.chunkContextTokens[i]! + b.chunkTokens[i]!);
  let ranks = 0;
  for (const r of [...b.chunkRanks, ...b.decodeRanks]) ranks += r;
  return b.prefillSeqs + b.decodeSeqs === 0 ? 0 : 3 + 0.013 * b.prefillTokens + 1e-5 * attention + 0.21 * b.decodeSeqs + 7e-4 * b.decodeContextTokens + 0.1 * ranks;
}

/** Nearest rank, as the fleet's queueing figures in steps. */
function queueing(d: number[]) {
  if (d.length === 0) return { meanSteps: 0, p50Steps: 0, p99Steps: 0, maxSteps: 0 };
  const s = [...d].sort((a, b) => a - b);
  const rank = (p: number) => s[Math.max(0, Math.ceil((p / 100) * s.length) - 1)]!;
  return { meanSteps: Math.round((d.reduce((a, x) => a + x, 0) / d.length) * 1e6) / 1e6, p50Steps: rank(50), p99Steps: rank(99), maxSteps: s[s.length - 1]! };
}

function req(timestamp: number, L: number, O: number, ids: number[]): TraceRequest {
  return { timestamp, inputLength: L, outputLength: O, hashIds: Int32Array.from(ids) };
}

describe('a timed fleet written from docs/fleet-time.md alone', () => {
  it('agrees with fleet() on every per-request time and every engine\'s steps', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({ gap: fc.integer({ min: 0, max: 120 }), L: fc.integer({ min: 0, max: 240 }), O: fc.integer({ min: 0, max: 80 }), id: fc.integer({ min: 1, max: 3 }), noTs: fc.boolean() }),
          { minLength: 1, maxLength: 16 },
        ),
        fc.record({
          engines: fc.integer({ min: 1, max: 3 }),
          router: fc.constantFrom('round-robin' as const, 'least-loaded' as const),
          scheduler: fc.constantFrom('xllm' as const, 'continuous' as const, 'vllm' as const),
          numBlocks: fc.oneof(fc.integer({ min: 3, max: 24 }), fc.integer({ min: 3, max: 64 })),
          blockSize: fc.constantFrom(4, 16),
          dpSize: fc.integer({ min: 1, max: 2 }),
          maxRunning: fc.integer({ min: 1, max: 6 }),
          maxNumBatchedTokens: fc.oneof(fc.integer({ min: 1, max: 24 }), fc.integer({ min: 1, max: 500 })),
          longPrefillTokenThreshold: fc.constantFrom(0, 0, 7, 40),
          schedulerReserveFullIsl: fc.boolean(),
          speedup: fc.constantFrom(0.5, 1, 3),
          concurrency: fc.constantFrom(0, 0, 1, 3),
          start: fc.constantFrom(0, 1e6, 1.7e15),
        }),
        (reqs, c) => {
          let ts = c.start;
          const trace = reqs.map((q) => {
            ts += q.gap;
            // vLLM computes a token of every prompt at least: engine 'vllm' refuses an empty one.
            const r = req(ts, c.scheduler === 'vllm' ? Math.max(q.L, 1) : q.L, q.O, [q.id]);
            return q.noTs ? { inputLength: r.inputLength, outputLength: r.outputLength, hashIds: r.hashIds } : r;
          });
          const o: ReferenceOptions = { trace, ...c, stepMs };
          const ref = referenceTimedFleet(o);
          const vllm = c.scheduler === 'vllm';
          const run = fleetSync({
            trace, engines: c.engines, router: c.router, numBlocks: c.numBlocks, blockSize: c.blockSize, dpSize: c.dpSize, maxRunning: c.maxRunning,
            timing: { name: 'reads-everything', stepMs },
            ...(vllm ? { engine: 'vllm' as const, longPrefillTokenThreshold: c.longPrefillTokenThreshold, schedulerReserveFullIsl: c.schedulerReserveFullIsl } : { scheduler: c.scheduler as 'xllm' | 'continuous' }),
            ...(c.scheduler !== 'xllm' && { maxNumBatchedTokens: c.maxNumBatchedTokens }),
            ...(c.concurrency > 0 ? { concurrency: c.concurrency } : { speedup: c.speedup }),
          });
          countSteps(ref.engines.reduce((a, e) => a + e.steps, 0));
          const t = run.latency!.requests;
          expect({ arrivalMs: t.arrivalMs, admittedMs: t.admittedMs, firstTokenMs: t.firstTokenMs, finishMs: t.finishMs, outputTokens: t.outputTokens }).toEqual({
            arrivalMs: ref.arrivalMs, admittedMs: ref.admittedMs, firstTokenMs: ref.firstTokenMs, finishMs: ref.finishMs, outputTokens: ref.outputTokens,
          });
          expect(trace.map((_, r) => tokenTimesMs(t, r))).toEqual(ref.tokenMs);
          expect(run.queueing).toEqual(queueing(ref.queueSteps));
          expect(run.latency!.engines.map((e) => ({ steps: e.steps, busyMs: e.busyMs }))).toEqual(ref.engines.map((e) => ({ steps: e.steps, busyMs: Math.round(e.busyMs * 1e3) / 1e3 })));
          expect(run.latency!.preemptions).toBe(ref.preemptions);
        },
      ),
      { numRuns: 250 },
    );
  });
});
