// An SLO no fleet can meet says why when the trace and the timing model
// show it (it used to say only "no fleet tried meets"): each request's
// prefill alone on an idle engine, with every prefix an earlier request
// shares already cached, is a floor under its TTFT; when the p99 of those
// floors is above the target, no number of engines meets it. The floor is
// checked against real runs, and the sentence against the command line.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import { fleetSync } from '../bindings/fleet/fleet.js';
import { cacheableTokens, ttftFloors } from '../bindings/fleet/slo-floor.js';
import type { TraceRequest } from '../bindings/replay/trace.js';
import { timingModel } from '../bindings/timing/timing-model.js';
import { capture } from './support/capture.js';

function req(timestamp: number, L: number, O: number, ids: number[]): TraceRequest {
  return { timestamp, inputLength: L, outputLength: O, hashIds: Int32Array.from(ids) };
}

describe('the TTFT floor', () => {
  it('counts as cacheable only what an earlier request shares, in whole blocks, never the whole prompt', () => {
    const t = [req(0, 1200, 1, [7, 8, 9]), req(1, 1100, 1, [7, 8, 5]), req(2, 600, 1, [7, 8]), req(3, 512, 1, [7]), req(4, 300, 1, [6])];
    // 1: shares ids 7, 8 with request 0: 1,024 tokens. 2: shares 7, 8 (600 of its tokens: ids 7 and 8's first 88): 592 in blocks of 16.
    // 3: its whole prompt is shared: all but one token, in whole blocks (496). 4: nothing.
    expect([...cacheableTokens(t, 5, 16)]).toEqual([0, 1024, 592, 496, 0]);
  });

  it('is below every request\'s TTFT in real runs of both schedulers and of engine vllm (random traces, pools, fleets)', () => {
    const model = timingModel();
    const request = fc.record({ gap: fc.integer({ min: 0, max: 300 }), L: fc.integer({ min: 1, max: 3000 }), O: fc.integer({ min: 0, max: 20 }), a: fc.integer({ min: 1, max: 3 }), b: fc.integer({ min: 1, max: 3 }) });
    fc.assert(
      fc.property(
        fc.array(request, { minLength: 1, maxLength: 20 }),
        fc.record({
          engines: fc.integer({ min: 1, max: 3 }), maxRunning: fc.integer({ min: 1, max: 4 }), scheduler: fc.constantFrom('xllm' as const, 'continuous' as const, 'vllm' as const),
          budget: fc.integer({ min: 64, max: 4096 }), threshold: fc.constantFrom(0, 0, 100, 700),
        }),
        (reqs, o) => {
          let ts = 0;
          const trace = reqs.map((q) => req((ts += q.gap), q.L, q.O, [q.a, q.b, 10, 11, 12, 13]));
          const vllm = o.scheduler === 'vllm';
          const run = fleetSync({
            trace, engines: o.engines, maxRunning: o.maxRunning, numBlocks: 4096, timing: true,
            ...(vllm ? { engine: 'vllm' as const, maxNumBatchedTokens: o.budget, longPrefillTokenThreshold: o.threshold } : { scheduler: o.scheduler as 'xllm' | 'continuous', ...(o.scheduler === 'continuous' && { maxNumBatchedTokens: o.budget }) }),
          });
          const l = run.latency!.requests;
          const floors = ttftFloors(trace, trace.length, model, { blockSize: 16, dpSize: 1, scheduler: o.scheduler, maxNumBatchedTokens: o.budget, longPrefillTokenThreshold: vllm ? o.threshold : 0 });
          let checked = 0;
          trace.forEach((_, r) => {
            if (l.firstTokenMs[r] === null) return;
            expect(l.firstTokenMs[r]! - l.arrivalMs[r]!, `request ${r}`).toBeGreaterThanOrEqual(floors[r]! - 1e-3);
            checked++;
          });
          expect(checked).toBeGreaterThan(0);
        },
      ),
      { numRuns: 60 },
    );
  });
});

describe('kvpool fleet and sweep say why no fleet can meet a TTFT target', () => {
  const args = ['--requests', '60', '--max-running', '4', '--num-blocks', '3000', '--scheduler', 'continuous', '--speedup', '40', '--no-progress'];

  it('kvpool fleet: the answer names the floor; JSON carries it as why', async () => {
    const r = await capture(() => main(['fleet', ...args, '--engines', '2', '--slo-ttft-ms', '50']));
    expect(r.code).toBe(0);
    expect(r.out).toMatch(
      /no fleet up to 2 engines meets p99 TTFT <= 50 ms \(2 engines: p99 TTFT [\d,.]+ ms\); no fleet can meet it: under the timing model \(polynomial\), \d+ of the 60 requests take longer than 50 ms to their first token even alone on an idle engine with every prefix an earlier request shares already cached \(p99 of those times [\d,.]+ ms; the longest, request \d+ of [\d,]+ prompt tokens, [\d,.]+ ms\)\n/,
    );
    const j = JSON.parse((await capture(() => main(['fleet', ...args, '--engines', '2', '--slo-ttft-ms', '50', '--json']))).out);
    expect(j.slo.answers[0].engines).toBeNull();
    expect(j.slo.answers[0].why).toMatch(/^no fleet can meet it: /);
  });

  it('says nothing more when more engines might meet it (the floor is under the target)', async () => {
    const r = await capture(() => main(['fleet', ...args, '--engines', '1', '--slo-ttft-ms', '2000', '--json']));
    const a = JSON.parse(r.out).slo.answers[0];
    expect(a.engines).toBeNull();
    expect(a.why).toBeUndefined();
  });

  it('kvpool sweep: each answer that none met carries the reason, per token budget', async () => {
    const r = await capture(() => main(['sweep', ...args, '--engines', '1,2', '--max-num-batched-tokens', '256,4096', '--slo-ttft-ms', '50', '--workers', '2']));
    expect(r.code).toBe(0);
    const lines = r.out.split('\n').filter((l) => l.startsWith('round-robin, max-num-batched-tokens'));
    expect(lines.length).toBe(2);
    for (const l of lines) expect(l).toMatch(/no fleet tried meets p99 TTFT <= 50 ms \(the largest, .*\); no fleet can meet it: under the timing model \(polynomial\)/);
  });
});
