// The Node entry agrees with the library across threads and names: a fleet
// sweep rejects with the error class fleet() throws for the same options
// (a RangeError that shows the batch, not a plain Error), and sloSearch
// takes a built-in trace's name, as fleet() and replay() do there.

import { describe, expect, it } from 'vitest';
import { fleetSync } from '../bindings/fleet/fleet.js';
import type { FleetOptions } from '../bindings/fleet/fleet-options.js';
import { sloSearch as librarySloSearch } from '../bindings/fleet/slo-search.js';
import { fleetSweep, readTraceFile, readTraceFileSync, sloSearch } from '../bindings/index.node.js';

/** What fleetSync throws for `options`. */
function thrownBy(options: FleetOptions): Error {
  try {
    fleetSync(options);
  } catch (e) {
    return e as Error;
  }
  throw new Error('fleetSync did not throw');
}

describe('fleetSweep rejects as fleet() throws', () => {
  const cases: Array<[string, FleetOptions]> = [
    // A step the model cannot time: fleet() shows the batch in a RangeError.
    ['a model answering Infinity', { requests: 5, timing: { kind: 'polynomial', baseMs: 1e308, prefillMsPerToken: 1e308 } }],
  ];
  for (const [what, options] of cases) {
    it(what, async () => {
      const lib = thrownBy({ ...options, engines: 1 });
      expect(lib).toBeInstanceOf(RangeError);
      const swept = await fleetSweep({ ...(options as object), grid: { engines: [1] }, workers: 1 }).then(
        () => null,
        (e: Error) => e,
      );
      expect(swept).not.toBeNull();
      expect(swept!.constructor).toBe(lib.constructor);
      expect(swept!.message).toBe(`configuration 1 (engines=1 router=round-robin): ${lib.message}`);
      expect(swept!.message).toMatch(/answered Infinity ms for a step \(\{"prefillTokens":/);
    });
  }
});

describe("sloSearch from the Node entry", () => {
  it('takes a built-in trace by name: the same runs as the library given the requests, the trace named in each config', async () => {
    const requests = await readTraceFile('mooncake-conversation', 80);
    const options = { limit: 80, timing: true as const, maxRunning: 8 };
    const named = sloSearch({ ...options, trace: 'mooncake-conversation' }, { ttftMs: 1e7 }, 2);
    const given = librarySloSearch({ ...options, trace: requests }, { ttftMs: 1e7 }, 2, 'mooncake-conversation');
    // Wall-clock figures aside (the only ones that are not a function of the inputs).
    const figures = (x: unknown) => JSON.parse(JSON.stringify(x, (k, v) => (k === 'seconds' || k === 'allocateCallsPerSecond' ? undefined : v)));
    expect(figures(named)).toEqual(figures(given));
    expect(named.runs[0]!.config.trace).toBe('mooncake-conversation');
    expect(named.runs[0]!.requests).toBe(80);
    // The library alone still asks for parsed requests (it reads no files).
    expect(() => librarySloSearch({ ...options, trace: 'mooncake-conversation' }, { ttftMs: 1e7 }, 2)).toThrow(/needs kvpool's Node entry/);
  });

  it('refuses bad targets before reading a trace, and a trace that is not there', () => {
    expect(() => sloSearch({ trace: '/nonexistent.jsonl', timing: true }, { ttftMs: -1 }, 2)).toThrow(/slo.ttftMs must be a finite number > 0/);
    expect(() => sloSearch({ trace: '/nonexistent.jsonl', timing: true }, { ttftMs: 1 }, 2)).toThrow(/no such file/);
  });

  it('reads a trace synchronously exactly as readTraceFile does, the first n requests or all', async () => {
    for (const limit of [0, 1, 500, Infinity]) expect(readTraceFileSync('mooncake-conversation', limit)).toEqual(await readTraceFile('mooncake-conversation', limit));
  });
});
