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
import { meetsSlo, sloSearch } from '../bindings/fleet/slo-search.js';
import { sloAnswer, sloAnswerLine } from '../bindings/fleet/slo-answer.js';
import { cacheableTokens, noFleetReason, ttftFloor, ttftFloors } from '../bindings/fleet/slo-floor.js';
import type { TraceRequest } from '../bindings/replay/trace.js';
import { timingModel, type TimingModel } from '../bindings/timing/timing-model.js';
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
          // So is their p99 under the run's, when every request gave a token (as meetsSlo asks): it is the percentile meetsSlo judges.
          const e = { blockSize: 16, dpSize: 1, scheduler: o.scheduler, maxNumBatchedTokens: o.budget, longPrefillTokenThreshold: vllm ? o.threshold : 0 };
          if (checked === trace.length) expect(ttftFloor(trace, trace.length, model, e, 1).p99).toBeLessThanOrEqual(run.latency!.ttftMs.p99 + 1e-3);
        },
      ),
      { numRuns: 60 },
    );
  });
});

describe('the floor never says no fleet can meet a target some fleet meets', () => {
  it('one long prompt among twenty: a target between the p99 of 2 engines and of 4 is met by 4, and the answer for 2 does not call it unmeetable', () => {
    // Request 7's 30,000 tokens take seconds alone; the others' 512 take milliseconds. p99 of 20 TTFTs lies between
    // the two largest (numpy's linear percentile): below request 7's own TTFT, the floors' largest.
    const trace = Array.from({ length: 20 }, (_, i) => {
      const L = i === 7 ? 30_000 : 512;
      return req(i * 1000, L, 10, Array.from({ length: Math.ceil(L / 512) }, (_, j) => i * 100 + j));
    });
    const model = timingModel();
    const [two, four] = [2, 4].map((engines) => fleetSync({ trace, engines, timing: true }));
    const ttftMs = (two!.latency!.ttftMs.p99 + four!.latency!.ttftMs.p99) / 2;
    expect(meetsSlo(four!, { ttftMs })).toBe(true);
    expect(meetsSlo(two!, { ttftMs })).toBe(false);
    // The longest floor is above the target (a nearest-rank p99 of the floors is that floor), yet a fleet meets it.
    const floor = ttftFloor(trace, 20, model, { blockSize: 16, dpSize: 1, scheduler: 'xllm' }, ttftMs);
    expect(floor.longest).toMatchObject({ request: 7, tokens: 30_000 });
    expect(floor.longest.ms).toBeGreaterThan(ttftMs);
    expect(floor.p99).toBeLessThanOrEqual(four!.latency!.ttftMs.p99);
    expect(noFleetReason(two!, trace, model, { ttftMs })).toBeUndefined();
    // A target under the floors' p99 is unmeetable, and said to be.
    expect(noFleetReason(two!, trace, model, { ttftMs: floor.p99 - 1 })).toMatch(/^no fleet can meet it: /);
  });
});

describe('sloSearch runs only the largest count when the floor shows no count can meet the target', () => {
  // Twenty prompts of 4,000 tokens, each its own: every floor is the same long prefill.
  const trace = Array.from({ length: 20 }, (_, i) => req(i * 50, 4000, 5, Array.from({ length: 8 }, (_, j) => i * 100 + j)));
  const options = { trace, numBlocks: 4096, scheduler: 'continuous' as const, maxNumBatchedTokens: 1024 };

  it('one run, of the most engines, and the answer of the search that runs every count', () => {
    const model = timingModel();
    const floor = ttftFloor(trace, 20, model, { blockSize: 16, dpSize: 1, scheduler: 'continuous', maxNumBatchedTokens: 1024 }, 1);
    const slo = { ttftMs: floor.p99 / 2 };
    const found = sloSearch(options, slo, [3, 1, 4, 2]);
    expect(found.runs.map((r) => r.config.engines)).toEqual([4]);
    expect(found.engines).toBeNull();
    expect(found.skipped).toBe(3);
    expect(found.why).toMatch(/^no fleet can meet it: under the timing model \(polynomial\), 20 of the 20 requests take longer than/);
    // The full search: every count run, none meets; its answer (and its reason afterwards) is the same.
    const every = [1, 2, 3, 4].map((engines) => fleetSync({ ...options, engines }));
    expect(every.some((r) => meetsSlo(r, slo))).toBe(false);
    expect(found.runs[0]).toEqual(every[3]);
    const full = { ...sloAnswer('round-robin', every, slo), why: noFleetReason(every[3]!, trace, model, slo)! };
    const quick = sloAnswer('round-robin', found.runs, slo);
    expect({ ...quick, why: found.why }).toEqual(full);
    // The line says what the full search says, then that the smaller counts did not run.
    expect(sloAnswerLine({ ...quick, why: found.why!, skipped: found.skipped }, slo, false)).toBe(`${sloAnswerLine(full, slo, false)}; so only the 4-engine fleet ran, not the 3 smaller ones`);
  });

  it('a target the floor allows runs the counts as before, from the smallest, and skips none', () => {
    const found = sloSearch(options, { ttftMs: 1e9 }, 3);
    expect(found.runs.map((r) => r.config.engines)).toEqual([1]);
    expect(found).toMatchObject({ engines: 1, skipped: 0 });
    expect(found.why).toBeUndefined();
    // No TTFT target: no floor to judge by; every count runs until one meets the targets (none here).
    const tpot = sloSearch(options, { tpotMs: 1e-3 }, 3);
    expect(tpot.runs.map((r) => r.config.engines)).toEqual([1, 2, 3]);
    expect(tpot).toMatchObject({ engines: null, skipped: 0 });
  });

  it("a model of one's own that beats the floor gets the full search: its largest fleet meeting the target shows it", () => {
    // Slow for every step the floor times, fast for every step a fleet runs after it: not a model whose step time
    // grows with its batch, so the floor is no floor under it.
    let calls = 0;
    let slowFor = 0;
    const model: TimingModel = { name: 'slow at first', stepMs: () => (calls++ < slowFor ? 1e6 : 1) };
    ttftFloor(trace, 20, model, { blockSize: 16, dpSize: 1, scheduler: 'continuous', maxNumBatchedTokens: 1024 }, 1);
    slowFor = calls;
    calls = 0;
    const found = sloSearch({ ...options, timing: model }, { ttftMs: 1000 }, 3);
    expect(calls).toBeGreaterThan(slowFor); // the floor was asked, and said no fleet can
    expect(found.why).toBeUndefined();
    expect(found).toMatchObject({ engines: 1, skipped: 0 });
    expect(found.runs.map((r) => r.config.engines)).toEqual([1]);
  });

  it('a step-clock fleet is refused as before, at its first run', () => {
    expect(() => sloSearch({ trace, numBlocks: 4096 }, { ttftMs: 1 }, 3)).toThrow(/an SLO needs a timed fleet run/);
  });
});

describe('kvpool fleet and sweep say why no fleet can meet a TTFT target', () => {
  const args = ['--requests', '60', '--max-running', '4', '--num-blocks', '3000', '--scheduler', 'continuous', '--speedup', '40', '--no-progress'];

  it('kvpool fleet: the answer names the floor; JSON carries it as why', async () => {
    const r = await capture(() => main(['fleet', ...args, '--engines', '2', '--slo-ttft-ms', '50']));
    expect(r.code).toBe(0);
    expect(r.out).toMatch(
      /no fleet up to 2 engines meets p99 TTFT <= 50 ms \(2 engines: p99 TTFT [\d,.]+ ms\); no fleet can meet it: under the timing model \(polynomial\), \d+ of the 60 requests take longer than 50 ms to their first token even alone on an idle engine with every prefix an earlier request shares already cached \(p99 of those times [\d,.]+ ms; the longest, request \d+ of [\d,]+ prompt tokens, [\d,.]+ ms\); so only the 2-engine fleet ran, not the 1 smaller one\n/,
    );
    const j = JSON.parse((await capture(() => main(['fleet', ...args, '--engines', '2', '--slo-ttft-ms', '50', '--json']))).out);
    expect(j.slo.answers[0].engines).toBeNull();
    expect(j.slo.answers[0].why).toMatch(/^no fleet can meet it: /);
    expect(j.slo.answers[0].skipped).toBe(1);
    // Only the largest count ran: one run in JSON, of 2 engines.
    expect(j.runs.map((x: { config: { engines: number } }) => x.config.engines)).toEqual([2]);
  });

  it('kvpool fleet: two routers, each searched by itself; a list of counts runs only its largest', async () => {
    const j = JSON.parse((await capture(() => main(['fleet', ...args, '--engines', '1,3,2', '--router', 'round-robin,least-loaded', '--slo-ttft-ms', '50', '--json']))).out);
    expect(j.runs.map((x: { config: { engines: number; router: string } }) => `${x.config.router} x ${x.config.engines}`)).toEqual(['round-robin x 3', 'least-loaded x 3']);
    expect(j.slo.answers.map((a: { engines: null; maxEngines: number; skipped: number }) => [a.engines, a.maxEngines, a.skipped])).toEqual([[null, 3, 2], [null, 3, 2]]);
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
