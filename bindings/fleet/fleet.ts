// `fleet()`: K engines behind a router, replaying a trace on a step clock
// (docs/fleet.md). Each step: requests that arrived are routed in trace
// order and queued; each engine, in index order, admits from its queue by
// the replay kernel's rules (engine 'vllm': runs one vLLM step); the
// engines' KV events of the step go to the router; the load is sampled.

import { loadCore } from '../core/plain-core.js';
import type { VllmEncodeOptions } from '../events/vllm.js';
import { ConcurrentBlockManagerImpl } from '../managers/concurrent-block-manager-impl.js';
import { traceArg } from '../replay/replay.js';
import type { TraceRequest } from '../replay/trace.js';
import { generateWorkload } from '../replay/workload.js';
import { checkRequests } from '../replay/stepper.js';
import { checkInt } from '../validate.js';
import { checkPrompts } from '../vllm/replay.js';
import type { VllmKvCacheManager } from '../vllm/kv-cache-manager.js';
import { FleetEngine } from './engine.js';
import type { StepEngine } from './step-engine.js';
import { VllmFleetEngine, VllmScratch } from './vllm-fleet-engine.js';
import { fleetConfig, parseFleetOptions, type FleetConfig, type FleetOptions, type ParsedFleetOptions } from './fleet-options.js';
import { assembleRun, engineFigures, type FleetRun } from './fleet-result.js';
import type { FleetView, Router } from './router.js';
import { LazyRequest } from './route-request.js';
import { EngineEvents, type FleetEventSink } from './engine-events.js';
import { createRouter } from './routers.js';
import { checkFleetFits } from './fleet-memory.js';
import { arrivalWarnings } from './arrival-warnings.js';
import { kvWarnings } from './kv-warnings.js';
import { TimedFleet } from './timed-fleet.js';
import { engineSlots } from './fleet-slots.js';

export type { FleetEventSink } from './engine-events.js';

/** Arrival step of each request: floor(timestamp / stepMs), never before the previous request's (a missing timestamp: the previous one's). */
export function arrivalSteps(trace: readonly TraceRequest[], n: number, stepMs: number, instant: boolean): Float64Array {
  const out = new Float64Array(n);
  let prev = 0;
  for (let r = 0; r < n; r++) {
    const ts = trace[r]!.timestamp;
    if (!instant && ts !== undefined) prev = Math.max(prev, Math.floor(ts / stepMs));
    // Past 2^53 steps are not whole numbers: the run would count steps it cannot tell apart (--step-ms 1e-300).
    if (prev > Number.MAX_SAFE_INTEGER) throw new RangeError(`trace[${r}] would arrive at step ${prev} (timestamp ${ts} ms / options.stepMs ${stepMs}), past the step clock's range of 2^53 - 1 steps: give a larger options.stepMs`);
    out[r] = prev;
  }
  return out;
}

/** Where a run is: the clock, the next request to route, the sums the figures are made of. */
interface RunState {
  n: number;
  arrival: Float64Array;
  view: FleetView;
  delays: number[];
  every: number;
  sumMax: number;
  sumLoad: number;
  next: number;
  t: number;
  lastStep: number;
  /** Every request arrived and the fleet is idle: the next step drains. */
  drain: boolean;
  over: boolean;
}

/** `run` with the notes on the trace's timestamps added, when its arrivals came from them (not instant, not a closed loop), and on a KV cache no GPU of the timing model holds. */
export function withRunWarnings(run: FleetRun, p: ParsedFleetOptions, trace: readonly TraceRequest[]): FleetRun {
  if (p.arrival === 'timestamps' && (p.timed === undefined || p.timed.concurrency === 0)) run.warnings.push(...arrivalWarnings(trace, run.requests));
  if (p.timed !== undefined) run.warnings.push(...kvWarnings(p.timed.model, p.replay.numBlocks, p.replay.blockSize, p.replay.dpSize));
  return run;
}

/** The router the options ask for: a built-in policy made for the engines' geometry, or the user's own. */
export function routerOf(p: ParsedFleetOptions): Router {
  const r = p.replay;
  return typeof p.router === 'string'
    ? createRouter(p.router, {
      blockSize: r.blockSize, capacity: (r.numBlocks - 1) * r.dpSize, prefixWeight: p.prefixWeight, loadWeight: p.loadWeight, affinityBlocks: p.affinityBlocks,
      ...(p.vllm !== undefined && { countCopies: true }),
    })
    : p.router;
}

/** A fleet set up to run once; `run()` then `dispose()` (the engines' pools stay readable in between). */
export class Fleet {
  readonly router: Router;
  readonly config: FleetConfig;
  private readonly engines: StepEngine[] = [];
  private readonly p: ParsedFleetOptions;
  private readonly trace: readonly TraceRequest[];
  private st: RunState | undefined;
  private readonly events: EngineEvents;
  /** A timed fleet (options.timing or scheduler 'continuous') runs there, from event to event. */
  private readonly timed: TimedFleet | undefined;

  /**
   * `sink` receives each engine's event batches at the end of every step,
   * in the form `wire` asks for (default: map, uint64 hashes; a router's
   * `onEvents` gets the same bytes).
   */
  constructor(options: FleetOptions = {}, traceName?: string, sink?: FleetEventSink, parsed?: ParsedFleetOptions, wire: Omit<VllmEncodeOptions, 'ts'> = {}) {
    const p = (this.p = parsed ?? parseFleetOptions(options));
    if (p.threads > 0) throw new RangeError(`options.threads ${p.threads} needs Node's fleet() (worker threads); this runs the engines in this thread`);
    const given = traceArg(options);
    this.trace = given ?? generateWorkload({ requests: p.replay.requests, seed: p.replay.seed });
    // Routers read the requests before an engine's loop checks them: every one is checked here first.
    checkRequests(this.trace, p.replay.limit);
    if (p.vllm !== undefined) checkPrompts(this.trace, p.replay.limit);
    // Before the first engine is built: a fleet too large for the core is refused with its ceiling.
    checkFleetFits(p);
    const r = p.replay;
    this.router = routerOf(p);
    this.config = fleetConfig(p, this.router.name, given === undefined ? undefined : (traceName ?? 'requests'));
    if (p.timed !== undefined) {
      this.timed = new TimedFleet(p, this.trace, this.router, this.config, sink, wire);
      this.events = new EngineEvents(this.router, undefined);
      return;
    }
    this.events = new EngineEvents(this.router, sink, wire);
    try {
      const n = Math.min(this.trace.length, r.limit ?? Infinity);
      const scratch = p.vllm === undefined ? undefined : new VllmScratch(n);
      for (let e = 0; e < p.engines; e++) {
        this.engines.push(p.vllm === undefined ? new FleetEngine(r, this.events.wanted) : new VllmFleetEngine(p.vllm, this.events.wanted, this.trace, scratch!));
      }
    } catch (err) {
      this.dispose();
      throw err;
    }
  }

  /** Engine `e`'s pool (until `dispose`); an xllm fleet's (a vLLM engine's caches: `vllmCaches`). */
  pool(e: number): FleetEngine['pool'] {
    checkInt('e', e, 0, this.p.engines - 1);
    if (this.p.vllm !== undefined) throw new TypeError("Fleet.pool: a fleet of engine 'vllm' has no BlockManagerPool; its engines' KV caches are Fleet.vllmCaches(e)");
    const pool = this.timed !== undefined ? this.timed.pool(e) : (this.engines[e] as FleetEngine | undefined)?.pool;
    if (pool === undefined || pool.isDisposed) throw new Error('Fleet.pool: this fleet was disposed; its pools are gone');
    return pool;
  }

  /**
   * Engine `e`'s metrics in the Prometheus text format (docs/metrics.md):
   * its pool's (`pool(e).metricsText`), or a vLLM engine's under vLLM's
   * names (`VllmEngine.metricsText`); `labels` are constant labels.
   */
  metricsText(e: number, labels: Record<string, string> = {}): string {
    if (this.p.vllm === undefined) return this.pool(e).metricsText(labels);
    this.vllmCaches(e); // checks e and that the fleet is not disposed
    const eng = this.timed !== undefined ? this.timed.vllmEngine(e) : (this.engines[e] as VllmFleetEngine).engine;
    return eng.metricsText(labels);
  }

  /** Engine `e`'s KV-cache managers, rank r's at index r (engine 'vllm'; until `dispose`). */
  vllmCaches(e: number): readonly VllmKvCacheManager[] {
    checkInt('e', e, 0, this.p.engines - 1);
    if (this.p.vllm === undefined) throw new TypeError("Fleet.vllmCaches: a fleet of engine 'xllm' has BlockManagerPools; they are Fleet.pool(e)");
    const kvs = this.timed !== undefined ? this.timed.vllmCaches(e) : (this.engines[e] as VllmFleetEngine | undefined)?.kvs;
    if (kvs === undefined || kvs.some((kv) => kv.pool.isDisposed)) throw new Error('Fleet.vllmCaches: this fleet was disposed; its caches are gone');
    return kvs;
  }

  /** Runs the whole trace and returns the result; once. */
  run(): FleetRun {
    if (this.timed !== undefined) return withRunWarnings(this.timed.run(), this.p, this.trace);
    if (this.st !== undefined) throw new Error('Fleet.run: this fleet has run already');
    while (this.step());
    return this.result();
  }

  /** Runs one step (after the last, the final drain); false once the run is over. Callers that publish events step it themselves. */
  step(): boolean {
    if (this.timed !== undefined) throw new Error('Fleet.step: a timed fleet runs from event to event, not by steps; call run()');
    const s = (this.st ??= this.start());
    if (s.over) return false;
    const { p, engines, router, trace } = this;
    const { n, arrival, delays } = s;
    const K = engines.length;
    if (n === 0 || s.drain) {
      for (const e of engines) e.drain();
      this.flushEvents(s.lastStep);
      p.replayOptions.onProgress?.(n, n);
      s.over = true;
      return false;
    }
    const t = s.t;
    for (const e of engines) e.tick(t);
    s.lastStep = t;
    for (; s.next < n && arrival[s.next] === t; s.next++) {
      const r = s.next;
      const e = router.route(new LazyRequest(r, trace[r]!, t, p.replay.blockSize, p.replay.seed), s.view);
      if (!Number.isInteger(e) || e < 0 || e >= K) throw new RangeError(`router ${router.name} answered ${String(e)} for request ${r}; engines are 0 to ${K - 1}`);
      engines[e]!.enqueue(r);
      if (r % s.every === 0) p.replayOptions.onProgress?.(r, n);
    }
    for (const e of engines) e.admit(t, trace, (r) => (delays[r] = t - arrival[r]!));
    this.flushEvents(t);
    let max = 0;
    for (const e of engines) {
      const l = e.load;
      if (l > max) max = l;
      s.sumLoad += l;
    }
    s.sumMax += max;
    if (s.next >= n && max === 0) s.drain = true;
    // Nothing decodes and nothing waits: the steps until the next arrival change nothing (and add no load).
    else s.t = max === 0 ? Math.max(t + 1, arrival[s.next]!) : t + 1;
    return true;
  }

  private start(): RunState {
    const { p, engines, trace } = this;
    const n = Math.min(trace.length, p.replay.limit ?? Infinity);
    const arrival = arrivalSteps(trace, n, p.stepMs, p.arrival === 'instant');
    const view: FleetView = {
      engines: engines.length,
      maxRunning: engineSlots(p),
      load: (e) => engines[e]!.load,
      running: (e) => engines[e]!.running,
      queued: (e) => engines[e]!.queued,
    };
    return {
      n, arrival, view, delays: new Array<number>(n), every: Math.max(1, Math.floor(n / 200)),
      sumMax: 0, sumLoad: 0, next: 0, t: n > 0 ? arrival[0]! : 0, lastStep: 0, drain: false, over: false,
    };
  }

  private flushEvents(t: number): void {
    const ts = (t * this.p.stepMs) / 1000;
    if (this.events.wanted) this.engines.forEach((e, i) => e.flushEvents(this.events, i, ts, t));
  }

  /** The run's result, once `step()` has returned false. */
  result(): FleetRun {
    const s = this.st;
    if (s === undefined || !s.over) throw new Error('Fleet.result: the run is not over (step() until it returns false, or run())');
    const { n, delays, lastStep, sumMax, sumLoad } = s;
    const perEngine = this.engines.map((e, i) => engineFigures(i, e.result(this.config), e.finishedEarly));
    return withRunWarnings(assembleRun(this.config, n, perEngine, delays, lastStep, sumMax, sumLoad), this.p, this.trace);
  }

  dispose(): void {
    this.timed?.dispose();
    for (const e of this.engines) e.dispose();
  }
}

/** `fleet` once the core is loaded (always the case in Node). */
export function fleetSync(options: FleetOptions = {}, traceName?: string): FleetRun {
  const f = new Fleet(options, traceName);
  try {
    return f.run();
  } finally {
    f.dispose();
  }
}

/**
 * Replays a trace through `engines` pools behind a router on a step clock
 * (docs/fleet.md) and returns the fleet's figures and every engine's.
 */
export async function fleet(options: FleetOptions = {}): Promise<FleetRun> {
  const p = parseFleetOptions(options);
  traceArg(options);
  await loadCore();
  if (p.replay.storeBlocks !== undefined) await ConcurrentBlockManagerImpl.ready();
  return fleetSync(options);
}
