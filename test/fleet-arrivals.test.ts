// What a planner's run says about its own inputs: a trace whose timestamps
// look like seconds (2,000 requests within 0.6 s read as ms) or are out of
// order used to run silently (`warnings: []`); now the result's warnings say
// so, on both clocks, with or without threads, and not when the arrivals do
// not come from the timestamps. A timed run's config no longer echoes the
// step clock's stepMs.

import { describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import { fleetSync } from '../bindings/fleet/fleet.js';
import { fleet } from '../bindings/node/fleet-file.js';
import type { TraceRequest } from '../bindings/replay/trace.js';
import { generateWorkload } from '../bindings/replay/workload.js';
import { capture } from './support/capture.js';

function req(timestamp: number | undefined, i: number): TraceRequest {
  return { ...(timestamp !== undefined && { timestamp }), inputLength: 300, outputLength: 4, hashIds: Int32Array.from([i % 5]) } as TraceRequest;
}

/** 2,000 requests over 600 s, written in seconds: read as ms, 0.6 s. */
const seconds = Array.from({ length: 2000 }, (_, i) => req((i * 600) / 2000, i));
/** In ms, in order but for request 10, stamped before request 9. */
const shuffled = Array.from({ length: 50 }, (_, i) => req(i === 10 ? 5 : i * 1000, i));
const SECONDS = "the trace's 2,000 timestamps span 599.7 ms, over 3,333 requests a second: timestamps are milliseconds; if the trace's are seconds, multiply them by 1,000";
const EARLY = '1 request has a timestamp earlier than a request before it (the first: request 10 at 5 ms): requests arrive in trace order, so each arrives with the latest one before it; sort the trace by timestamp if that is not what you meant';

describe('warnings on a trace\'s timestamps', () => {
  it('timestamps that look like seconds: on the step clock and the millisecond clock', () => {
    expect(fleetSync({ trace: seconds, engines: 2 }).warnings).toContain(SECONDS);
    expect(fleetSync({ trace: seconds, engines: 2, timing: true }).warnings).toContain(SECONDS);
    expect(fleetSync({ trace: seconds, engines: 2, scheduler: 'continuous', speedup: 3 }).warnings).toContain(SECONDS);
  });

  it('timestamps out of order: on both clocks and on worker threads', async () => {
    expect(fleetSync({ trace: shuffled, engines: 2 }).warnings).toEqual([EARLY]);
    expect(fleetSync({ trace: shuffled, engines: 2, timing: true }).warnings).toEqual([EARLY]);
    expect((await fleet({ trace: shuffled, engines: 2, threads: 2 })).warnings).toEqual([EARLY]);
  });

  it('none when the arrivals do not come from the timestamps (instant, a closed loop), or the trace is in order at a plausible rate', () => {
    for (const t of [seconds, shuffled]) {
      expect(fleetSync({ trace: t, engines: 2, arrival: 'instant' }).warnings).toEqual([]);
      expect(fleetSync({ trace: t, engines: 2, timing: true, concurrency: 4 }).warnings).toEqual([]);
    }
    // The built-in workload (a request a millisecond) and the same trace in ms.
    expect(fleetSync({ trace: generateWorkload({ requests: 300 }), engines: 2 }).warnings).toEqual([]);
    expect(fleetSync({ trace: seconds.map((r) => ({ ...r, timestamp: r.timestamp! * 1000 })), engines: 2, numBlocks: 4096 }).warnings).toEqual([]);
    // Requests without a timestamp take the one before: nothing to say.
    expect(fleetSync({ trace: [req(5, 0), req(undefined, 1), req(7, 2)], engines: 1 }).warnings).toEqual([]);
  });

  it('on the command line, as a warning on stderr', async () => {
    const { writeFileSync, mkdtempSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const file = join(mkdtempSync(join(tmpdir(), 'kvpool-arrivals-')), 'seconds.jsonl');
    writeFileSync(file, seconds.map((r) => JSON.stringify({ timestamp: r.timestamp, input_length: r.inputLength, output_length: r.outputLength, hash_ids: [...r.hashIds] })).join('\n'));
    const r = await capture(() => main(['fleet', file, '--engines', '2', '--timing', 'default', '--no-progress']));
    expect(r.code).toBe(0);
    expect(r.err).toContain(`kvpool: warning: ${SECONDS}\n`);
  });
});

describe('a timed run\'s config', () => {
  it('has no stepMs (a timed step lasts what the model says); the step clock\'s keeps it', () => {
    const trace = generateWorkload({ requests: 20 });
    expect(fleetSync({ trace, engines: 1 }).config.stepMs).toBe(20);
    for (const o of [{ timing: true as const }, { scheduler: 'continuous' as const }]) {
      const c = fleetSync({ trace, engines: 1, ...o }).config;
      expect('stepMs' in c).toBe(false);
      expect(c.timing).toBe('polynomial');
    }
  });
});
