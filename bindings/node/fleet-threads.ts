// The fleet with its engines on worker threads (`threads` > 0): engines in
// contiguous groups, one group per thread, the router in this thread. Each
// step the router's thread asks the groups for their loads (only in steps
// with arrivals), routes, sends each group its requests, and gets back the
// loads, the admissions and the encoded event batches: the same rules, in
// the same order, as the in-thread fleet (bindings/fleet/fleet.ts), so the
// results are identical (a test checks 0, 1 and 2 threads).

import type { Worker } from 'node:worker_threads';
import { loadCore } from '../core/plain-core.js';
import { parseWireOptions, type VllmEncodeOptions } from '../events/vllm.js';
import { arrivalSteps, routerOf, withRunWarnings, type FleetEventSink } from '../fleet/fleet.js';
import { checkFleetFits } from '../fleet/fleet-memory.js';
import { fleetConfig, type FleetOptions, type ParsedFleetOptions } from '../fleet/fleet-options.js';
import { assembleRun, type FleetEngineFigures, type FleetRun } from '../fleet/fleet-result.js';
import type { EngineGroup, GroupLoads, GroupStepReply } from '../fleet/engine-group.js';
import { LazyRequest } from '../fleet/route-request.js';
import type { FleetView } from '../fleet/router.js';
import { traceArg } from '../replay/replay.js';
import { checkRequests } from '../replay/stepper.js';
import type { TraceRequest } from '../replay/trace.js';
import { generateWorkload } from '../replay/workload.js';
import type { FleetWorkerCall, FleetWorkerData } from './fleet-worker.js';
import { startWorker } from './worker.js';

type RunAhead = ReturnType<EngineGroup['runAhead']>;

/** A worker answering one call at a time. */
class GroupThread {
  private readonly waiting: Array<{ resolve: (v: unknown) => void; reject: (e: Error) => void }> = [];
  private failure: Error | null = null;

  constructor(readonly worker: Worker, readonly first: number, readonly count: number) {
    worker.on('message', (m: { error?: string }) => {
      const w = this.waiting.shift();
      if (m !== null && typeof m === 'object' && typeof m.error === 'string') {
        this.fail(new Error(`fleet worker (engines ${first}-${first + count - 1}): ${m.error}`), w);
      } else w?.resolve(m);
    });
    worker.on('error', (e) => this.fail(e, this.waiting.shift()));
    worker.on('exit', (code) => {
      if (this.waiting.length > 0) this.fail(new Error(`a fleet worker exited with code ${code}`), this.waiting.shift());
    });
  }

  private fail(e: Error, w: { reject: (e: Error) => void } | undefined): void {
    this.failure ??= e;
    w?.reject(e);
    for (const x of this.waiting.splice(0)) x.reject(e);
  }

  call<T>(m: FleetWorkerCall): Promise<T> {
    if (this.failure) return Promise.reject(this.failure);
    return new Promise<T>((resolve, reject) => {
      this.waiting.push({ resolve: resolve as (v: unknown) => void, reject });
      this.worker.postMessage(m);
    });
  }
}

/** Where a fleet on threads sends its engines' event batches, step by step (`kvpool fleet --zmq --threads`). */
export interface FleetPublish {
  sink: FleetEventSink;
  /** Awaited after each step's batches went to the sink (the publishers sending them). */
  settle?: () => Promise<void>;
  /** The batches' form (default: map, uint64 hashes). */
  wire?: Omit<VllmEncodeOptions, 'ts'>;
}

/**
 * The fleet of `options` (parsed: `p`) on worker threads, over its trace
 * (requests) or else the built-in workload, once the core is loaded;
 * `traceName` is what the result's config calls the trace.
 */
export async function fleetOnThreadsOf(options: FleetOptions, p: ParsedFleetOptions, traceName: string | undefined, publish?: FleetPublish): Promise<FleetRun> {
  await loadCore();
  const trace = traceArg(options) ?? generateWorkload({ requests: p.replay.requests, seed: p.replay.seed });
  return fleetOnThreads(p, trace, traceName, publish);
}

/** Runs the fleet of `p` over `trace` with its engines on `p.threads` worker threads; `publish`: a sink for the event batches. */
export async function fleetOnThreads(p: ParsedFleetOptions, trace: readonly TraceRequest[], traceName: string | undefined, publish?: FleetPublish): Promise<FleetRun> {
  if (publish !== undefined) {
    if (typeof publish.sink !== 'function') throw new TypeError('publish.sink must be a function');
    parseWireOptions({ ...publish.wire, ts: 0 });
  }
  // Routers read the requests before an engine's loop checks them: every one is checked here first.
  checkRequests(trace, p.replay.limit);
  checkFleetFits(p);
  const router = routerOf(p);
  const config = fleetConfig(p, router.name, traceName);
  const K = p.engines;
  const g = Math.min(p.threads, K);
  const events = typeof router.onEvents === 'function' || publish !== undefined;
  const threads: GroupThread[] = [];
  try {
    for (let i = 0; i < g; i++) {
      const first = Math.floor((i * K) / g);
      const count = Math.floor(((i + 1) * K) / g) - first;
      const data: FleetWorkerData = {
        replay: p.replay, indices: Array.from({ length: count }, (_, j) => first + j), events, trace: trace as TraceRequest[], stepMs: p.stepMs,
        ...(publish?.wire !== undefined && { wire: publish.wire }),
      };
      threads.push(new GroupThread(startWorker('fleet-worker', { workerData: data }), first, count));
    }
    const n = Math.min(trace.length, p.replay.limit ?? Infinity);
    const arrival = arrivalSteps(trace, n, p.stepMs, p.arrival === 'instant');
    const running = new Array<number>(K).fill(0);
    const queued = new Array<number>(K).fill(0);
    const view: FleetView = { engines: K, maxRunning: p.replay.maxRunning, load: (e) => running[e]! + queued[e]!, running: (e) => running[e]!, queued: (e) => queued[e]! };
    const groupOf = (e: number) => threads.findIndex((x) => e < x.first + x.count);
    const delays = new Array<number>(n);
    const onProgress = p.replayOptions.onProgress;
    const every = Math.max(1, Math.floor(n / 200));
    let sumMax = 0;
    let sumLoad = 0;
    let next = 0;
    let t = n > 0 ? arrival[0]! : 0;
    let lastStep = 0;
    const deliver = async (all: Array<Array<[number, Uint8Array[]]>>, t: number) => {
      for (const list of all) {
        for (const [e, batches] of list) {
          router.onEvents?.(e, batches);
          publish?.sink(e, batches, t);
        }
      }
      await publish?.settle?.();
    };
    while (n > 0) {
      lastStep = t;
      const arrives = next < n && arrival[next] === t;
      if (arrives) {
        const loads = await Promise.all(threads.map((x) => x.call<GroupLoads>({ type: 'tick', t })));
        loads.forEach((l, i) => l.running.forEach((v, j) => ((running[threads[i]!.first + j] = v), (queued[threads[i]!.first + j] = l.queued[j]!))));
      }
      const assigned: number[][] = threads.map(() => []);
      for (; next < n && arrival[next] === t; next++) {
        const r = next;
        const e = router.route(new LazyRequest(r, trace[r]!, t, p.replay.blockSize, p.replay.seed), view);
        if (!Number.isInteger(e) || e < 0 || e >= K) throw new RangeError(`router ${router.name} answered ${String(e)} for request ${r}; engines are 0 to ${K - 1}`);
        queued[e]!++;
        assigned[groupOf(e)]!.push(e, r);
        if (onProgress && r % every === 0) onProgress(r, n);
      }
      const replies = await Promise.all(threads.map((x, i) => x.call<GroupStepReply>({ type: 'step', t, tick: !arrives, assigned: assigned[i]! })));
      let max = 0;
      for (const rep of replies) {
        for (let i = 0; i < rep.admitted.length; i += 2) delays[rep.admitted[i]!] = rep.admitted[i + 1]! - arrival[rep.admitted[i]!]!;
        for (const l of rep.loads) {
          if (l > max) max = l;
          sumLoad += l;
        }
      }
      sumMax += max;
      await deliver(replies.map((x) => x.events), t);
      if (next >= n && max === 0) break;
      // A router that takes no events needs the engines only when requests
      // arrive: the groups run ahead to the next arrival (or, after the last,
      // until idle) in one call, reporting each step's loads.
      const until = next < n ? arrival[next]! : Infinity;
      if (!events && t + 1 < until) {
        const runs = await Promise.all(threads.map((x) => x.call<RunAhead>({ type: 'run', from: t + 1, until: until === Infinity ? -1 : until })));
        const len = Math.max(...runs.map((x) => x.max.length));
        for (let i = 0; i < len; i++) {
          let m = 0;
          for (const x of runs) {
            const v = x.max[i] ?? 0;
            if (v > m) m = v;
            sumLoad += x.sum[i] ?? 0;
          }
          sumMax += m;
        }
        for (const x of runs) for (let i = 0; i < x.admitted.length; i += 2) delays[x.admitted[i]!] = x.admitted[i + 1]! - arrival[x.admitted[i]!]!;
        if (until === Infinity) {
          lastStep = Math.max(...runs.map((x) => x.idleAt));
          break;
        }
        t = until;
        continue;
      }
      t = max === 0 ? Math.max(t + 1, arrival[next]!) : t + 1;
    }
    const ends = await Promise.all(threads.map((x) => x.call<{ events: Array<[number, Uint8Array[]]>; figures: FleetEngineFigures[] }>({ type: 'finish', lastStep, config })));
    await deliver(ends.map((x) => x.events), lastStep);
    onProgress?.(n, n);
    return withRunWarnings(assembleRun(config, n, ends.flatMap((x) => x.figures), delays, lastStep, sumMax, sumLoad), p, trace);
  } finally {
    await Promise.all(threads.map((x) => x.worker.terminate()));
  }
}
