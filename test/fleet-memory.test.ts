// A fleet too large for its thread's 4 GiB core is refused before its first
// engine is built, with the ceiling for its options (`--engines 4096` used
// to build about 1,230 engines over 18 s and then fail on Wasm memory).

import { describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import { plainCore } from '../bindings/core/plain-core.js';
import { fleetSync } from '../bindings/fleet/fleet.js';
import { CORE_BYTES, checkFleetFits, engineCoreBytes } from '../bindings/fleet/fleet-memory.js';
import { parseFleetOptions } from '../bindings/fleet/fleet-options.js';
import { fleetSweep } from '../bindings/node/fleet-sweep.js';
import { parseReplayOptions } from '../bindings/replay/replay.js';
import { capture } from './support/capture.js';

const rt = plainCore();
const heap = () => ({ top: rt.ex.heapTop() >>> 0, free: rt.ex.heapFreeBytes() });

describe('how many engines fit', () => {
  it('measures an engine by its options: more blocks, ranks or a host tier cost more', () => {
    const plain = engineCoreBytes(parseReplayOptions({}));
    expect(plain).toBeGreaterThan(65536 * 50); // about 53 bytes a block with the prefix cache
    expect(plain).toBeLessThan(65536 * 64);
    expect(engineCoreBytes(parseReplayOptions({ dpSize: 4 }))).toBeGreaterThan(3.9 * plain);
    expect(engineCoreBytes(parseReplayOptions({ hostBlocks: 65536 }))).toBeGreaterThan(1.9 * plain);
    expect(engineCoreBytes(parseReplayOptions({ numBlocks: 1024 }))).toBeLessThan(plain / 30);
  });

  it('refuses a fleet over the ceiling before building an engine, naming the ceiling, and leaves the core as it was', () => {
    fleetSync({ requests: 4, engines: 2 }); // the core's staging areas as a run leaves them
    const before = heap();
    let err: Error | undefined;
    try {
      fleetSync({ requests: 4, engines: 4096 });
    } catch (e) {
      err = e as Error;
    }
    expect(err).toBeInstanceOf(RangeError);
    const per = engineCoreBytes(parseReplayOptions({}));
    const most = Math.floor((CORE_BYTES - (before.top - before.free)) / per);
    expect(most).toBeGreaterThan(1000);
    expect(most).toBeLessThan(4096);
    expect(err!.message).toContain(`options.engines 4096: 4,096 engines of 65,536 blocks need`);
    expect(err!.message).toContain(`at most ${most.toLocaleString('en-US')} such engines fit in one thread`);
    expect(err!.message).toMatch(/give options.threads \d+ or more/);
    expect(heap()).toEqual(before);
  });

  it('counts per worker thread when the engines are spread over threads', () => {
    const per = engineCoreBytes(parseReplayOptions({}));
    const perWorker = Math.floor((CORE_BYTES - (64 << 20)) / per);
    const threads = Math.ceil(4096 / perWorker);
    expect(() => checkFleetFits(parseFleetOptions({ engines: 4096, threads }))).not.toThrow();
    expect(() => checkFleetFits(parseFleetOptions({ engines: 4096, threads: threads - 1 }))).toThrow(new RegExp(`on each of ${threads - 1} worker threads need .*give options.threads ${threads} or more`));
  });

  it('on the command line: one line naming --engines, before the trace is read; a timed fleet is told it runs in one thread', async () => {
    const step = await capture(() => main(['fleet', '/nonexistent.jsonl', '--engines', '4096']));
    expect(step.code).toBe(1);
    expect(step.err).toMatch(/^kvpool: --engines 4096: 4,096 engines of 65,536 blocks need 1[0-9.]+ GiB of Wasm memory \(3\.\d MiB each\); a thread's core holds at most 4 GiB, [\d.]+ GiB of it free here: at most 1,\d{3} such engines fit in one thread; give --threads \d+ or more \(each worker thread has a core of its own\), or give each engine fewer blocks\n$/);
    const timed = await capture(() => main(['fleet', '/nonexistent.jsonl', '--engines', '4096', '--scheduler', 'continuous']));
    expect(timed.err).toMatch(/at most 1,\d{3} such engines fit in one thread; a timed fleet runs in one thread: give each engine fewer blocks\n$/);
    // The SLO search tries up to the count given: the largest must fit.
    const slo = await capture(() => main(['fleet', '/nonexistent.jsonl', '--engines', '4096', '--scheduler', 'continuous', '--slo-ttft-ms', '100']));
    expect(slo.err).toMatch(/^kvpool: --engines 4096: /);
  });

  it('a sweep refuses such a fleet before it starts (each fleet runs on one worker thread)', async () => {
    const err = await fleetSweep({ requests: 4, grid: { engines: [2, 4096] }, workers: 1 }).then(() => null, (e: Error) => e);
    expect(err).toBeInstanceOf(RangeError);
    expect(err!.message).toMatch(/^configuration 2 of 2 \(engines=4096 router=round-robin\): options.engines 4096: .* a sweep runs each fleet in one worker thread: give each engine fewer blocks$/);
  });
});
