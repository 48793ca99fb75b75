// The fleet with its engines on worker threads gives exactly the in-thread
// fleet's result: every figure of the fleet and of each engine (timings
// apart), for a router that reads only loads and for one fed by the
// engines' KV events, with 1 and 2 threads. With an event sink, the threads
// hand it the same batches, in the same order, as the in-thread fleet does.

import { describe, expect, it } from 'vitest';
import { Decoder } from '@msgpack/msgpack';
import { KVEventIndex } from '../bindings/events/kv-event-index.js';
import { Fleet, fleetSync } from '../bindings/fleet/fleet.js';
import { parseFleetOptions } from '../bindings/fleet/fleet-options.js';
import { fleetOnThreads } from '../bindings/node/fleet-threads.js';
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

  it('refuses a bad request before any thread starts, naming it by its index', async () => {
    const ok = { inputLength: 40, outputLength: 1, hashIds: Int32Array.of(1), timestamp: 0 };
    await expect(fleet({ trace: [ok, null as never], engines: 2, threads: 2 })).rejects.toThrow(
      new TypeError('trace[1] must be a trace request ({ inputLength, outputLength, hashIds }), got null'),
    );
  });

  it('the same with instant arrival (one routing step, then the groups run to idle) and uneven groups (5 engines on 3 threads)', async () => {
    const o = { trace, engines: 5, router: 'round-robin' as const, arrival: 'instant' as const };
    const here = fleetSync(o);
    expect(here.queueing.maxSteps).toBeGreaterThan(0);
    expect(timingFree(await fleet({ ...o, threads: 3 }))).toEqual(timingFree(here));
  }, 60_000);

  it('hands an event sink the in-thread fleet\'s batches, step by step, in the wire form asked for', async () => {
    const o = { trace, engines: 3, router: 'precise-prefix' as const, numBlocks: 6000, stepMs: 40 };
    const wire = { format: 'positional' as const, blockHashes: 'bytes' as const };
    const here: Array<[number, number, Uint8Array]> = [];
    const f = new Fleet(o, 'trace', (e, batches, step) => batches.forEach((b) => here.push([e, step, b.slice()])), undefined, wire);
    let inThread;
    try {
      inThread = f.run();
    } finally {
      f.dispose();
    }
    const there: Array<[number, number, Uint8Array]> = [];
    let settled = 0;
    const r = await fleetOnThreads(parseFleetOptions({ ...o, threads: 2 }), trace, 'trace', {
      sink: (e, batches, step) => batches.forEach((b) => there.push([e, step, b])),
      settle: async () => void settled++,
      wire,
    });
    expect(timingFree(r)).toEqual(timingFree(inThread));
    expect(timingFree(r)).toEqual(timingFree(fleetSync(o, 'trace')));
    expect(here.length).toBeGreaterThan(50);
    // Byte for byte (as base64: deep equality of typed arrays is element by element).
    const text = (list: typeof here) => list.map(([e, step, b]) => `${e} ${step} ${Buffer.from(b).toString('base64')}`);
    expect(text(there)).toEqual(text(here));
    expect(settled).toBeGreaterThan(50);
    // The form asked for: positional events, 16-byte hashes; each engine's stream rebuilds its final cache.
    const first = new Decoder().decode(here.find(([, , b]) => b.length > 100)![2]) as [number, unknown[][]];
    expect(first[1][0]![0]).toBe('BlockStored');
    expect((first[1][0]![1] as unknown[])[0]).toBeInstanceOf(Uint8Array);
    for (let e = 0; e < 3; e++) {
      const idx = new KVEventIndex();
      for (const [x, , b] of here) if (x === e) idx.applyBatch('x', b);
      expect(idx.blocks('x').length).toBe(inThread.engines[e]!.run.cachedBlocksAtEnd);
      expect(typeof idx.blocks('x')[0]!.hash).toBe('string');
    }
  }, 60_000);

  it('the in-thread entries refuse threads', () => {
    expect(() => fleetSync({ trace, threads: 2 })).toThrow(/options.threads 2 needs Node's fleet\(\)/);
  });
});
