// The latency figures of a timed fleet as vLLM's serving benchmark defines
// them (docs/fleet-time.md, the figures): TTFT, TPOT per request, ITL over
// every gap between tokens, E2E; means and percentiles interpolated
// linearly between the closest ranks, as numpy.percentile's default. Every
// figure can be recomputed from the per-request output.

import fc from 'fast-check';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { fleetSync } from '../bindings/fleet/fleet.js';
import type { FleetOptions } from '../bindings/fleet/fleet-options.js';
import { tokenTimesMs, type FleetLatency } from '../bindings/fleet/fleet-latency.js';
import { latencyFigures, type LatencyFigures } from '../bindings/fleet/latency-figures.js';
import { readTraceFile } from '../bindings/node/trace-file.js';
import type { TraceRequest } from '../bindings/replay/trace.js';
import type { TimingModel } from '../bindings/timing/timing-model.js';
import { TRACE_PATH } from './support/externals.js';
import { FLEET_LATENCY_ENGINE_GLOSSARY, FLEET_LATENCY_GLOSSARY, LATENCY_FIGURE_FIELDS } from '../bindings/cli/fleet-glossary.js';

const round3 = (x: number) => Math.round(x * 1e3) / 1e3;

/** The figures the plain way: sort everything, interpolate as numpy does (with its lerp). */
function reference(values: readonly number[]): LatencyFigures {
  const n = values.length;
  if (n === 0) return { count: 0, mean: 0, p50: 0, p90: 0, p95: 0, p99: 0, max: 0 };
  const x = [...values].sort((a, b) => a - b);
  const pct = (p: number) => {
    const h = (n - 1) * (p / 100);
    const lo = Math.floor(h);
    const a = x[lo]!;
    const b = x[Math.min(lo + 1, n - 1)]!;
    const t = h - lo;
    return round3(t >= 0.5 ? b - (b - a) * (1 - t) : a + (b - a) * t);
  };
  return { count: n, mean: round3(values.reduce((s, v) => s + v, 0) / n), p50: pct(50), p90: pct(90), p95: pct(95), p99: pct(99), max: round3(x[n - 1]!) };
}

const figuresOf = (values: readonly number[]) => latencyFigures(Float64Array.from(values), values.length);

describe('percentiles as numpy gives them', () => {
  const fixture = JSON.parse(readFileSync(new URL('./fixtures/numpy-percentiles.json', import.meta.url), 'utf8')) as {
    cases: Array<{ n: number; name?: string; mean: number; p50: number; p90: number; p95: number; p99: number; max: number }>;
  };
  const valuesOf = (c: { n: number; name?: string }) =>
    c.name === 'equal' ? Array<number>(9000).fill(5.052)
      : c.name === 'two' ? [...Array<number>(6000).fill(1), ...Array<number>(61).fill(1e6)]
        : Array.from({ length: c.n }, (_, i) => ((i * 7919 + 13) % 10007) * 0.37 + (i % 7));

  it("agrees with numpy.percentile's default method on the recorded cases, small and large (selected, not sorted)", () => {
    for (const c of fixture.cases) {
      const f = figuresOf(valuesOf(c));
      expect(f, `case ${c.name ?? c.n}`).toEqual({ count: c.n, mean: round3(c.mean), p50: round3(c.p50), p90: round3(c.p90), p95: round3(c.p95), p99: round3(c.p99), max: round3(c.max) });
    }
  });

  it('takes q = p / 100 first, as numpy does: p95 of seven values is at 6 × 0.95 = 5.699999999999999', () => {
    // numpy.percentile([6, 6, 6, 6, 7.875, 6, 5], 95) = 7.312499999999998 (at 5.7 exactly it would be 7.3125, rounded up to 7.313).
    expect(figuresOf([6, 6, 6, 6, 7.875, 6, 5]).p95).toBe(7.312);
  });

  it('selecting the ranks gives what sorting every value gives, on random values with many ties', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 12_000 }),
        fc.integer({ min: 1, max: 1_000_000 }),
        fc.integer({ min: 0, max: 2 ** 31 - 1 }),
        (n, spread, seed) => {
          let s = seed;
          const values = Array.from({ length: n }, () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) % spread) / 7);
          expect(figuresOf(values)).toEqual(reference(values));
        },
      ),
      { numRuns: 60 },
    );
  });
});

function req(timestamp: number, L: number, O: number, ids: number[]): TraceRequest {
  return { timestamp, inputLength: L, outputLength: O, hashIds: Int32Array.from(ids) };
}

/** Every figure, recomputed from the per-request output alone. */
function recompute(l: FleetLatency): Pick<FleetLatency, 'ttftMs' | 'tpotMs' | 'itlMs' | 'e2eMs' | 'queueMs' | 'outputTokens' | 'completed'> {
  const t = l.requests;
  const ttft: number[] = [], tpot: number[] = [], itl: number[] = [], e2e: number[] = [], queue: number[] = [];
  for (let r = 0; r < t.arrivalMs.length; r++) {
    const a = t.arrivalMs[r]!;
    if (t.admittedMs[r] !== null) queue.push(t.admittedMs[r]! - a);
    const times = tokenTimesMs(t, r);
    if (times.length === 0) continue;
    ttft.push(times[0]! - a);
    e2e.push(times[times.length - 1]! - a);
    if (times.length < 2) continue;
    tpot.push((times[times.length - 1]! - times[0]!) / (times.length - 1));
    for (let i = 1; i < times.length; i++) itl.push(times[i]! - times[i - 1]!);
  }
  return {
    ttftMs: reference(ttft), tpotMs: reference(tpot), itlMs: reference(itl), e2eMs: reference(e2e), queueMs: reference(queue),
    outputTokens: t.outputTokens.reduce((s, k) => s + k, 0), completed: ttft.length,
  };
}

describe('every figure from the per-request output', () => {
  it('TTFT, TPOT, ITL, E2E and queueing follow from each request\'s token times (trace and random pools with preemption, both schedulers)', async () => {
    const trace = await readTraceFile(TRACE_PATH, 200);
    for (const scheduler of ['xllm', 'continuous'] as const) {
      const run = fleetSync({ trace, engines: 3, router: 'least-loaded', timing: true, scheduler, numBlocks: 6000 });
      const l = run.latency!;
      expect(l).toMatchObject(recompute(l));
      // Served requests: first token and finish are their first and last token times.
      for (let r = 0; r < trace.length; r++) {
        const times = tokenTimesMs(l.requests, r);
        expect(times).toHaveLength(l.requests.outputTokens[r]!);
        if (times.length > 0) expect([times[0], times[times.length - 1]]).toEqual([l.requests.firstTokenMs[r], l.requests.finishMs[r]]);
      }
    }
    fc.assert(
      fc.property(
        fc.array(fc.record({ gap: fc.integer({ min: 0, max: 100 }), L: fc.integer({ min: 1, max: 200 }), O: fc.integer({ min: 0, max: 40 }), id: fc.integer({ min: 1, max: 3 }) }), { minLength: 1, maxLength: 12 }),
        fc.record({ scheduler: fc.constantFrom('xllm' as const, 'continuous' as const), numBlocks: fc.integer({ min: 6, max: 40 }), budget: fc.integer({ min: 1, max: 300 }), dpSize: fc.integer({ min: 1, max: 2 }) }),
        (reqs, c) => {
          let ts = 0;
          const t = reqs.map((q) => req((ts += q.gap), q.L, q.O, [q.id]));
          const o: FleetOptions = { trace: t, engines: 2, numBlocks: c.numBlocks, dpSize: c.dpSize, maxRunning: 4, timing: true, scheduler: c.scheduler, ...(c.scheduler === 'continuous' && { maxNumBatchedTokens: c.budget }) };
          const l = fleetSync(o).latency!;
          expect(l).toMatchObject(recompute(l));
        },
      ),
      { numRuns: 120 },
    );
  });

  it('ITL catches the stall a long prefill puts between two tokens, where TPOT averages it away', () => {
    // Request 0 decodes 20 tokens at 10 ms a step; request 1's 4,000-token prompt joins one of its steps, which then takes 400 ms.
    const model: TimingModel = { name: 'stall', stepMs: (b) => 10 + b.prefillTokens / 10 };
    const run = fleetSync({ trace: [req(0, 16, 20, [1]), req(55, 4000, 1, [2, 3, 4, 5, 6, 7, 8, 9])], engines: 1, timing: model });
    const l = run.latency!;
    const first = tokenTimesMs(l.requests, 0);
    const gaps = first.slice(1).map((x, i) => x - first[i]!);
    expect(gaps.filter((g) => g === 410)).toHaveLength(1);
    expect(l.itlMs.max).toBe(410);
    expect(l.tpotMs).toMatchObject({ count: 1, max: round3((410 + 18 * 10) / 19) });
    expect(l.itlMs.count).toBe(19);
  });
});

describe('docs/fleet-time.md', () => {
  it('defines every latency field the result has', () => {
    const doc = readFileSync(new URL('../docs/fleet-time.md', import.meta.url), 'utf8');
    const run = fleetSync({ trace: [req(0, 64, 3, [1])], engines: 1, timing: true });
    const l = run.latency!;
    const keys = [
      ...Object.keys(l), ...Object.keys(l.requests), ...Object.keys(l.engines[0]!), ...Object.keys(l.ttftMs),
      ...[...FLEET_LATENCY_GLOSSARY, ...FLEET_LATENCY_ENGINE_GLOSSARY].map((e) => e.key.split('.').pop()!), ...LATENCY_FIGURE_FIELDS,
    ];
    for (const k of new Set(keys)) expect(doc.includes(`\`${k}\``) || doc.includes(`\`${k}[]\``), k).toBe(true);
  });
});
