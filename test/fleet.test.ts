// The fleet (docs/fleet.md) against the replay kernel and by its own
// definitions: one engine is replay() whatever the arrival, and the queueing,
// load and rejection figures are what the rules give on hand-made traces.

import { describe, expect, it } from 'vitest';
import { readTraceFile } from '../bindings/node/trace-file.js';
import { Fleet, arrivalSteps, fleetSync } from '../bindings/fleet/fleet.js';
import type { Router } from '../bindings/fleet/router.js';
import { replaySync } from '../bindings/replay/replay.js';
import type { TraceRequest } from '../bindings/replay/trace.js';
import { figures } from './support/replay-figures.js';
import { TRACE_PATH } from './support/externals.js';

const LIMIT = 1500;
const trace = await readTraceFile(TRACE_PATH, LIMIT);

/** A request of `L` prompt tokens whose 512-token chunks are `ids`. */
function req(timestamp: number, L: number, O: number, ids: number[]): TraceRequest {
  return { timestamp, inputLength: L, outputLength: O, hashIds: Int32Array.from(ids) };
}

/** Sends everything to engine `e`. */
const always = (e: number): Router => ({ name: `always-${e}`, route: () => e });

describe('a fleet of one engine is replay()', () => {
  for (const [mode, extra] of [
    ['plain', {}],
    ['lfu eviction, 16384 blocks', { eviction: 'lfu' as const, numBlocks: 16384 }],
    ['host tier', { numBlocks: 16384, hostBlocks: 32768 }],
  ] as const) {
    it(`gives replay()'s hits, evictions and id checksum on the Mooncake trace's first ${LIMIT} requests (${mode}), instant arrival`, () => {
      const expected = replaySync({ trace, ...extra });
      const f = fleetSync({ trace, ...extra, engines: 1, arrival: 'instant' });
      expect(expected.evictedBlocks).toBeGreaterThan(0);
      expect(figures(f.engines[0]!.run)).toEqual(figures(expected));
      expect([f.matchedBlocks, f.evictedBlocks, f.engines[0]!.idChecksum]).toEqual([expected.matchedBlocks, expected.evictedBlocks, expected.idChecksum]);
      expect(f.hitRate).toBe(expected.hitRate);
      expect(f.loadImbalance).toBe(1);
      // Everything arrived at step 0 and 32 slots serve 1,500 requests: most wait.
      expect(f.queueing.p50Steps).toBeGreaterThan(0);
    });
  }

  it('with the trace timestamps it places the same requests, and every block ends free or cached', () => {
    const expected = replaySync({ trace });
    const f = fleetSync({ trace, engines: 1, stepMs: 5 });
    const run = f.engines[0]!.run;
    expect([run.requests, run.rejected, run.promptBlocks]).toEqual([expected.requests, expected.rejected, expected.promptBlocks]);
    expect(run.freeBlocksAtEnd + run.cachedBlocksAtEnd).toBe(65535);
    // The trace's 1,500 requests span about 7 minutes of timestamps.
    expect(f.steps).toBeGreaterThan(Math.floor(trace[LIMIT - 1]!.timestamp! / 5));
  });
});

describe('the step clock and queueing', () => {
  it('arrival steps are floor(timestamp / stepMs), never decreasing, a missing timestamp the previous one', () => {
    const t = [req(0, 16, 1, [0]), req(45, 16, 1, [0]), req(30, 16, 1, [0]), { inputLength: 16, outputLength: 1, hashIds: Int32Array.of(0) }, req(100, 16, 1, [0])];
    expect([...arrivalSteps(t, 5, 20, false)]).toEqual([0, 2, 2, 2, 5]);
    expect([...arrivalSteps(t, 5, 20, true)]).toEqual([0, 0, 0, 0, 0]);
  });

  it('one slot: requests wait for the previous one to finish decoding (max(outputLength, 1) steps)', () => {
    const t = [req(0, 40, 5, [1]), req(0, 40, 5, [2]), req(0, 40, 0, [3]), req(0, 40, 3, [4])];
    const f = fleetSync({ trace: t, engines: 1, maxRunning: 1, numBlocks: 64, stepMs: 1 });
    // Admitted at steps 0, 5, 10, 11; delays 0, 5, 10, 11; the last decodes through step 13.
    expect(f.queueing).toEqual({ meanSteps: 6.5, p50Steps: 5, p99Steps: 11, maxSteps: 11 });
    expect(f.steps).toBe(14);
  });

  it('a request is cached once it is done decoding, with slots to spare', () => {
    // r0 decodes through step 1 and is finished (cached) then; r1 repeats its prompt at step 5.
    const t = [req(0, 512, 2, [1]), req(5, 512, 2, [1]), req(5, 512, 2, [2])];
    const f = fleetSync({ trace: t, engines: 1, numBlocks: 256, stepMs: 1 });
    // The exact-prompt rule gives the last of the 32 blocks back.
    expect(f.matchedBlocks).toBe(31);
    // Done at step 1, not yet: r1 arrives while r0 still decodes (step 1 is its last) and finds nothing.
    expect(fleetSync({ trace: [req(0, 512, 2, [1]), req(1, 512, 2, [1])], engines: 1, numBlocks: 256, stepMs: 1 }).matchedBlocks).toBe(0);
  });

  it('a later arrival does not wait for a slot that is free', () => {
    const t = [req(0, 40, 5, [1]), req(7, 40, 5, [2])];
    const f = fleetSync({ trace: t, engines: 1, maxRunning: 1, numBlocks: 64, stepMs: 1 });
    expect(f.queueing.maxSteps).toBe(0);
    expect(f.steps).toBe(12);
  });

  it('load imbalance is K when one engine carries everything, 1 when the load is even', () => {
    const t = [req(0, 40, 4, [1]), req(0, 40, 4, [2]), req(2, 40, 9, [3]), req(2, 40, 9, [4])];
    const skewed = fleetSync({ trace: t, engines: 3, router: always(1), numBlocks: 64, stepMs: 1 });
    expect(skewed.loadImbalance).toBe(3);
    expect(skewed.engines.map((e) => e.requests)).toEqual([0, 4, 0]);
    expect(skewed.warnings).toContain('2 of 3 engines were sent no request by the router');
    const even = fleetSync({ trace: t, engines: 2, router: 'round-robin', numBlocks: 64, stepMs: 1 });
    expect(even.loadImbalance).toBe(1);
    // Round-robin 0,1,0,1,0; loads (e0, e1): steps 0-1 (1,1); 2-3 (3,2); 4-10 (2,1); 11-31 (1,0).
    // Sum of maxima 2 + 6 + 14 + 21 = 43, of loads 4 + 10 + 21 + 21 = 56.
    const uneven = fleetSync({ trace: [...t, req(2, 40, 30, [5])], engines: 2, router: 'round-robin', numBlocks: 64, stepMs: 1 });
    expect(uneven.loadImbalance).toBe(Math.round(((2 * 43) / 56) * 1e6) / 1e6);
    expect(uneven.steps).toBe(32);
  });

  it('counts a request whose prompt fits no engine as rejected, and goes on', () => {
    const t = [req(0, 40, 2, [1]), req(1, 5000, 2, [2, 3, 4, 5, 6, 7, 8, 9, 10, 11]), req(2, 40, 2, [1])];
    const f = fleetSync({ trace: t, engines: 2, router: always(0), numBlocks: 64, stepMs: 1 });
    expect(f.rejected).toBe(1);
    expect(f.requests).toBe(3);
    expect(f.engines[0]!.rejected).toBe(1);
    // The failed prefill finished the first request (its 2 full blocks were
    // cached) and then evicted them trying to make room: the third finds nothing.
    expect(f.evictedBlocks).toBe(2);
    expect(f.matchedBlocks).toBe(0);
    expect(f.warnings[0]).toMatch(/1 of 3 requests were rejected/);
  });
});

describe('options and misuse', () => {
  it('checks options before building anything, naming the option', () => {
    expect(() => fleetSync({ trace, engines: 0 })).toThrow(new RangeError('options.engines must be in [1, 4096], got 0'));
    expect(() => fleetSync({ trace, router: 'random' as never })).toThrow(/options.router must be one of round-robin, least-loaded/);
    expect(() => fleetSync({ trace, stepMs: 0 })).toThrow(new RangeError('options.stepMs must be a finite number > 0, got 0'));
    // A step so short that an arrival's step is past 2^53 - 1: the clock could not tell its steps apart.
    const late = [{ timestamp: 0, inputLength: 16, outputLength: 1, hashIds: Int32Array.of(1) }, { timestamp: 3000, inputLength: 16, outputLength: 1, hashIds: Int32Array.of(2) }];
    expect(() => fleetSync({ trace: late, stepMs: 1e-300 })).toThrow(/^trace\[1\] would arrive at step 3e\+303 \(timestamp 3000 ms \/ options\.stepMs 1e-300\), past the step clock's range of 2\^53 - 1 steps/);
    expect(fleetSync({ trace: late, stepMs: 3000 / Number.MAX_SAFE_INTEGER }).requests).toBe(2);
    expect(() => fleetSync({ trace, loadWeight: 0.5 })).toThrow(/options.loadWeight must be an integer/);
    expect(() => fleetSync({ trace, numBlock: 5 } as never)).toThrow(/numBlock/);
    // An unknown key is named with every key a fleet takes, its own included.
    expect(() => fleetSync({ trace, engins: 4 } as never)).toThrow(/unknown option "engins" \(known: trace, .*numBlocks.*, engine, maxNumSeqs, .*, engines, router, stepMs/);
    expect(() => fleetSync({ trace, engine: 4 } as never)).toThrow(new TypeError("options.engine must be 'xllm' or 'vllm', got 4"));
  });

  it('refuses a bad request before any engine runs, naming it by its index', () => {
    const ok = req(0, 40, 1, [1]);
    expect(() => fleetSync({ trace: [ok, null as never], engines: 2 })).toThrow(new TypeError('trace[1] must be a trace request ({ inputLength, outputLength, hashIds }), got null'));
    expect(() => fleetSync({ trace: [ok, { ...ok, outputLength: -1 }], engines: 2 })).toThrow(/^trace\[1\]\.outputLength must be in \[0, \d+\], got -1$/);
    // The step clock counts to a timestamp: a non-finite or negative one is refused.
    for (const timestamp of [Infinity, -5, NaN]) {
      expect(() => fleetSync({ trace: [ok, { ...ok, timestamp }], engines: 2 })).toThrow(
        new RangeError(`trace[1].timestamp must be a number of milliseconds in [0, 2^53 - 1] (or absent), got ${timestamp}`),
      );
    }
  });

  it("gives an engine's pool by its index, until disposed", () => {
    const f = new Fleet({ trace: [req(0, 40, 1, [1])], engines: 2, numBlocks: 64 });
    f.run();
    expect(f.pool(1).numFreeBlocks()).toEqual([63]);
    expect(() => f.pool(2)).toThrow(new RangeError('e must be in [0, 1], got 2'));
    expect(() => f.pool(-1)).toThrow(RangeError);
    expect(() => f.pool('0' as never)).toThrow(TypeError);
    f.dispose();
    expect(() => f.pool(0)).toThrow('Fleet.pool: this fleet was disposed; its pools are gone');
  });

  it('refuses a router answer outside the fleet', () => {
    expect(() => fleetSync({ trace: [req(0, 40, 1, [1])], engines: 2, router: always(2), numBlocks: 64 })).toThrow(
      new RangeError('router always-2 answered 2 for request 0; engines are 0 to 1'),
    );
  });

  it('runs once', () => {
    const f = new Fleet({ trace: [req(0, 40, 1, [1])], engines: 2, numBlocks: 64 });
    try {
      f.run();
      expect(() => f.run()).toThrow('Fleet.run: this fleet has run already');
    } finally {
      f.dispose();
    }
  });
});
