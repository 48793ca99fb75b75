// The fleet with its engines on worker threads gives exactly the in-thread
// fleet's result: every figure of the fleet and of each engine (timings
// apart), for a router that reads only loads and for one fed by the
// engines' KV events, with 1 and 2 threads.

import { describe, expect, it } from 'vitest';
import { fleetSync } from '../bindings/fleet/fleet.js';
import type { FleetRun } from '../bindings/fleet/fleet-result.js';
import { fleet } from '../bindings/node/fleet-file.js';
import { readTraceFile } from '../bindings/node/trace-file.js';
import { TRACE_PATH } from './support/externals.js';

const trace = await readTraceFile(TRACE_PATH, 250);

/** The result without wall-clock figures (the engines' loop seconds and call rates). */
function timingFree(r: FleetRun): unknown {
  return { ...r, engines: r.engines.map((e) => ({ ...e, run: { ...e.run, seconds: 0, allocateCallsPerSecond: 0 } })) };
}

describe('a fleet on worker threads', () => {
  for (const router of ['least-loaded', 'precise-prefix'] as const) {
    it(`gives the in-thread result with 1 and 2 threads (${router}, 5 engines)`, async () => {
      const o = { trace, engines: 5, router, numBlocks: 12000, stepMs: 40 };
      const here = fleetSync(o);
      expect(here.evictedBlocks).toBeGreaterThan(0);
      expect(here.matchedBlocks).toBeGreaterThan(0);
      for (const threads of [1, 2]) {
        const there = await fleet({ ...o, threads });
        expect(timingFree(there), `${threads} threads`).toEqual(timingFree(here));
      }
    }, 60_000);
  }

  it('the same with instant arrival (one routing step, then the groups run to idle) and uneven groups (5 engines on 3 threads)', async () => {
    const o = { trace, engines: 5, router: 'round-robin' as const, arrival: 'instant' as const };
    const here = fleetSync(o);
    expect(here.queueing.maxSteps).toBeGreaterThan(0);
    expect(timingFree(await fleet({ ...o, threads: 3 }))).toEqual(timingFree(here));
  }, 60_000);

  it('the in-thread entries refuse threads', () => {
    expect(() => fleetSync({ trace, threads: 2 })).toThrow(/options.threads 2 needs Node's fleet\(\)/);
  });
});
