// Each built-in router does what docs/fleet.md says, on small hand-made
// traces where the right answer can be worked out by hand.

import { describe, expect, it } from 'vitest';
import { fleetSync } from '../bindings/fleet/fleet.js';
import type { FleetOptions } from '../bindings/fleet/fleet-options.js';
import { ApproximatePrefixRouter } from '../bindings/fleet/approximate-prefix.js';
import { PrecisePrefixRouter } from '../bindings/fleet/precise-prefix.js';
import type { FleetView, RouteRequest, Router } from '../bindings/fleet/router.js';
import { createRouter, type RouterPolicy } from '../bindings/fleet/routers.js';
import type { TraceRequest } from '../bindings/replay/trace.js';

function req(timestamp: number, L: number, O: number, ids: number[]): TraceRequest {
  return { timestamp, inputLength: L, outputLength: O, hashIds: Int32Array.from(ids) };
}

/** The engine each request went to, in trace order. */
function routes(trace: TraceRequest[], router: RouterPolicy | Router, o: FleetOptions = {}): number[] {
  const inner = typeof router === 'string'
    ? createRouter(router, { blockSize: o.blockSize ?? 16, capacity: 1000, prefixWeight: o.prefixWeight ?? 1, loadWeight: o.loadWeight ?? 1, affinityBlocks: o.affinityBlocks ?? 1 })
    : router;
  const got: number[] = [];
  const spy: Router = {
    name: inner.name,
    route: (q: RouteRequest, v: FleetView) => {
      const e = inner.route(q, v);
      got[q.index] = e;
      return e;
    },
  };
  if (inner.onEvents) spy.onEvents = (e, b) => inner.onEvents!(e, b);
  fleetSync({ numBlocks: 256, stepMs: 1, ...o, trace, router: spy });
  return got;
}

/** `turns` turns of `sessions` conversations, each turn's prompt the previous one plus a 512-token chunk. */
function conversations(sessions: number, turns: number, gap: number): TraceRequest[] {
  const out: TraceRequest[] = [];
  for (let t = 0; t < turns; t++) {
    for (let s = 0; s < sessions; s++) {
      const ids = Array.from({ length: t + 1 }, (_, c) => 1000 * (s + 1) + c);
      out.push(req(t * gap + s, 512 * (t + 1), 4, ids));
    }
  }
  return out;
}

describe('round-robin', () => {
  it('sends the j-th request to engine j mod K, whatever the load', () => {
    const t = Array.from({ length: 7 }, (_, i) => req(0, 40, i === 0 ? 50 : 1, [i]));
    expect(routes(t, 'round-robin', { engines: 3 })).toEqual([0, 1, 2, 0, 1, 2, 0]);
  });
});

describe('least-loaded', () => {
  it('picks the engine with the fewest running + queued, ties to the lowest index', () => {
    // Step 0: r0 -> 0 (all 0), r1 -> 1. r0 decodes 10 steps, r1 one step.
    // Step 3: loads (1, 0): r2 -> 1; then (1, 1): r3 -> 0 (tie); then (2, 1): r4 -> 1.
    const t = [req(0, 40, 10, [1]), req(0, 40, 1, [2]), req(3, 40, 5, [3]), req(3, 40, 5, [4]), req(3, 40, 5, [5])];
    expect(routes(t, 'least-loaded', { engines: 2 })).toEqual([0, 1, 1, 0, 1]);
  });

  it('counts queued requests: with one slot per engine, a burst spreads evenly', () => {
    const t = Array.from({ length: 6 }, (_, i) => req(0, 40, 8, [i]));
    expect(routes(t, 'least-loaded', { engines: 3, maxRunning: 1 })).toEqual([0, 1, 2, 0, 1, 2]);
  });
});

describe('session affinity', () => {
  const trace = conversations(40, 3, 100);

  it('sends every turn of a conversation to the engine of its first turn, and spreads conversations', () => {
    const got = routes(trace, 'session-affinity', { engines: 4 });
    for (let s = 0; s < 40; s++) expect([got[40 + s], got[80 + s]]).toEqual([got[s], got[s]]);
    expect(new Set(got).size).toBe(4);
  });

  it('is consistent hashing: a fifth engine takes sessions only to itself', () => {
    const four = routes(trace, 'session-affinity', { engines: 4 });
    const five = routes(trace, 'session-affinity', { engines: 5 });
    const moved = four.map((e, i) => (e === five[i] ? null : five[i])).filter((e) => e !== null);
    expect(moved.length).toBeGreaterThan(0);
    expect(new Set(moved)).toEqual(new Set([4]));
  });

  it('hashes the first block by default: prompts sharing it go to one engine; affinityBlocks looks further', () => {
    // Every prompt starts with the same 512-token chunk (as in the Mooncake trace).
    const shared = Array.from({ length: 20 }, (_, s) => req(s, 1024, 2, [7, 100 + s]));
    expect(new Set(routes(shared, 'session-affinity', { engines: 4 })).size).toBe(1);
    // Block 33 (1-based) of 16 tokens is the first block of the second chunk.
    expect(new Set(routes(shared, 'session-affinity', { engines: 4, affinityBlocks: 33 })).size).toBeGreaterThan(1);
  });
});

describe('approximate prefix', () => {
  it('sends a prompt where it sent its prefix before, even in the same step', () => {
    // r0 -> 0 (ties); r1 (another prefix) -> 1 (load); r2 extends r0's prompt: engine 0 is
    // remembered to hold 32 of its 64 blocks: 1*32*32 - 1*1*64 > 0 - 1*1*64 (engine 1) and > 0 - 0 (engine 2).
    const t = [req(0, 512, 4, [1]), req(0, 512, 4, [2]), req(0, 1024, 4, [1, 3])];
    expect(routes(t, 'approximate-prefix', { engines: 3 })).toEqual([0, 1, 0]);
  });

  it('lets load win when loadWeight outweighs the prefix', () => {
    const t = [req(0, 512, 4, [1]), req(0, 512, 4, [2]), req(0, 1024, 4, [1, 3])];
    // Engine 0: 32*32 - 40*1*64 < engine 2: 0.
    expect(routes(t, 'approximate-prefix', { engines: 3, loadWeight: 40 })).toEqual([0, 1, 2]);
  });

  it('remembers at most its capacity per engine, forgetting the least recent', () => {
    const r = new ApproximatePrefixRouter({ capacity: 40 });
    const t = [req(0, 512, 4, [1]), req(1, 512, 4, [2]), req(2, 512, 4, [1])];
    routes(t, r, { engines: 1 });
    expect(r.remembered(0)).toBe(40);
  });
});

describe('precise prefix', () => {
  it('follows what the engines cached as of the previous step, not what it routed', () => {
    // publishAfterPrefill: r0's prompt blocks are cached (and announced) in step 0.
    // r1 in step 0 (another prefix) -> 1 by load; r2 at step 0 extends r0 but the index
    // has not seen r0's blocks yet: by load -> 2. r3 at step 1 extends r0: engine 0 holds 32 blocks.
    const t = [req(0, 512, 8, [1]), req(0, 512, 8, [2]), req(0, 1024, 8, [1, 3]), req(1, 1024, 8, [1, 4])];
    const o = { engines: 3, publishAfterPrefill: true };
    expect(routes(t, 'precise-prefix', o)).toEqual([0, 1, 2, 0]);
    // The approximate router sends r2 to engine 0 already (it remembers what it routed).
    expect(routes(t, 'approximate-prefix', o)).toEqual([0, 1, 0, 0]);
  });

  it('knows which blocks the engine evicted (the approximate router does not)', () => {
    // 39 usable blocks, one slot. r0 (32 full blocks + 1) runs on engine 0; r1 arrives at
    // step 2, the kernel finishes r0 (its 32 blocks are cached) and evicts 26 of them,
    // the least recent first, to place r1's 33: engine 0 keeps r0's first 6 blocks.
    // r2 repeats r0's prompt at step 5 while r1 still decodes on engine 0 (load 1).
    const t = [req(0, 512, 1, [1]), req(2, 512, 10, [2]), req(5, 512, 1, [1])];
    const w = { prefixWeight: 2, loadWeight: 1 };
    const o = { engines: 2, numBlocks: 40, maxRunning: 1 };
    // Approximate: engine 0 scores 2*32*1 - 1*1*32 = 32 > engine 1's 0.
    expect(routes(t, new ApproximatePrefixRouter({ capacity: 1000, ...w }), o)).toEqual([0, 0, 0]);
    // Precise: engine 0 scores 2*6*1 - 1*1*32 = -20 < engine 1's 0.
    const precise = new PrecisePrefixRouter({ blockSize: 16, ...w });
    expect(routes(t, precise, o)).toEqual([0, 0, 1]);
  });
});
