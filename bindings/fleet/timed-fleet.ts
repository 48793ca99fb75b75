// A fleet on the millisecond clock (docs/fleet-time.md): every engine steps
// on its own, a step lasting what the timing model says of its batch, and
// the run moves from event to event — an arrival, or the end of some
// engine's step. At equal times arrivals come first, then engines in index
// order. An engine with work begins its next step the moment its last one
// ends; an idle one the moment a request is routed to it (after every
// arrival of that moment).

import type { TraceRequest } from '../replay/trace.js';
import { emptyStepBatch } from '../timing/timing-model.js';
import { describe } from '../validate.js';
import { ContinuousEngine } from './continuous-engine.js';
import { EngineEvents, type FleetEventSink } from './engine-events.js';
import { RequestClock } from './fleet-latency.js';
import type { FleetConfig, ParsedFleetOptions } from './fleet-options.js';
import { assembleRun, engineFigures, type FleetRun } from './fleet-result.js';
import { KernelScratch, KernelTimedEngine } from './kernel-timed-engine.js';
import { LoadArea } from './load-area.js';
import { LazyRequest } from './route-request.js';
import type { FleetView, Router } from './router.js';
import { StepHeap } from './step-heap.js';
import type { TimedEngine } from './timed-engine.js';
import type { ParsedTimedOptions } from './timed-options.js';
import type { VllmEncodeOptions } from '../events/vllm.js';
import type { BlockManagerPool } from '../pool/block-manager-pool.js';
import type { VllmKvCacheManager } from '../vllm/kv-cache-manager.js';
import { VllmFleetEngine, VllmScratch } from './vllm-fleet-engine.js';
import { engineSlots } from './fleet-slots.js';

/**
 * The clock's range: times count from the first arrival and stay at most
 * 2^53 - 1 ms after it, where a double still holds every millisecond (and
 * far finer: below 2^32 ms, about 50 days, to 2^-20 ms). An arrival or a
 * step end beyond it is refused rather than rounded away.
 */
export const MAX_CLOCK_MS = Number.MAX_SAFE_INTEGER;

/** Where the clock starts in the trace's milliseconds: request 0's timestamp / speedup (0 without one, or with instant arrivals). */
export function arrivalOrigin(trace: readonly TraceRequest[], n: number, speedup: number, instant: boolean): number {
  const ts = n > 0 && !instant ? trace[0]!.timestamp : undefined;
  return ts === undefined ? 0 : ts / speedup;
}

/**
 * Open loop: request r arrives at max((its timestamp - request 0's) /
 * speedup, the previous arrival) ms after the first arrival (no timestamp:
 * the previous arrival; instant: 0). The differences are taken before the
 * division, so timestamps near 2^53 keep their fractions of a millisecond.
 */
export function arrivalTimes(trace: readonly TraceRequest[], n: number, speedup: number, instant: boolean): Float64Array {
  const out = new Float64Array(n);
  if (instant || n === 0) return out;
  const t0 = trace[0]!.timestamp ?? 0;
  let prev = 0;
  for (let r = 0; r < n; r++) {
    const ts = trace[r]!.timestamp;
    if (ts !== undefined) {
      const a = (ts - t0) / speedup;
      if (a > prev) {
        if (!(a <= MAX_CLOCK_MS)) {
          throw new RangeError(`options.speedup ${speedup}: trace[${r}] would arrive ${a} ms after the first request ((${ts} - ${t0}) / ${speedup}), past the clock's range of 2^53 - 1 ms; give a larger speedup`);
        }
        prev = a;
      }
    }
    out[r] = prev;
  }
  return out;
}

export class TimedFleet {
  private readonly engines: TimedEngine[] = [];
  private readonly t: ParsedTimedOptions;
  private readonly n: number;
  private readonly clock: RequestClock;
  private readonly delays: number[];
  private readonly events: EngineEvents;
  private ran = false;

  constructor(
    private readonly p: ParsedFleetOptions,
    private readonly trace: readonly TraceRequest[],
    readonly router: Router,
    readonly config: FleetConfig,
    sink?: FleetEventSink,
    wire: Omit<VllmEncodeOptions, 'ts'> = {},
  ) {
    this.t = p.timed!;
    const r = p.replay;
    if (this.t.scheduler === 'continuous' && (r.slidingWindow !== undefined || r.linearStateSlots !== undefined)) {
      throw new RangeError("options.scheduler 'continuous' runs plain pools and the host tier; slidingWindow and linearStateSlots need scheduler 'xllm'");
    }
    this.n = Math.min(trace.length, r.limit ?? Infinity);
    this.clock = new RequestClock(this.n, p.engines);
    this.delays = new Array<number>(this.n).fill(0);
    this.events = new EngineEvents(router, sink, wire);
    const delay = (q: number, steps: number) => (this.delays[q] = steps);
    const scratch = this.t.scheduler === 'xllm' ? new KernelScratch(this.n) : undefined;
    const vllmScratch = p.vllm !== undefined ? new VllmScratch(this.n) : undefined;
    try {
      for (let e = 0; e < p.engines; e++) {
        this.engines.push(p.vllm !== undefined
          ? new VllmFleetEngine(p.vllm, this.events.wanted, trace, vllmScratch!, this.clock, delay)
          : this.t.scheduler === 'continuous'
            ? new ContinuousEngine(r, this.events.wanted, trace, this.clock, this.t.maxNumBatchedTokens, delay)
            : new KernelTimedEngine(r, this.events.wanted, trace, this.clock, delay, scratch!));
      }
    } catch (err) {
      this.dispose();
      throw err;
    }
  }

  /** Engine `e`'s pool (an xllm fleet's engines). */
  pool(e: number): BlockManagerPool {
    return (this.engines[e] as TimedEngine & { pool: BlockManagerPool }).pool;
  }

  /** Engine `e`'s vLLM engine (engine 'vllm'). */
  vllmEngine(e: number): VllmFleetEngine['engine'] {
    return (this.engines[e] as VllmFleetEngine).engine;
  }

  /** Engine `e`'s KV-cache managers (engine 'vllm'). */
  vllmCaches(e: number): readonly VllmKvCacheManager[] {
    return (this.engines[e] as VllmFleetEngine).kvs;
  }

  run(): FleetRun {
    if (this.ran) throw new Error('Fleet.run: this fleet has run already');
    this.ran = true;
    const { p, t, n, clock, engines, router, trace } = this;
    const K = engines.length;
    const closed = t.concurrency > 0;
    const instant = p.arrival === 'instant';
    if (!closed) clock.arrivalMs.set(arrivalTimes(trace, n, t.speedup, instant));
    // KV events carry the trace's own time, as on the step clock.
    const originMs = closed ? 0 : arrivalOrigin(trace, n, t.speedup, instant);
    // Closed loop: the times at which a slot is free, in order; the next request arrives at the first.
    const slots: number[] = [];
    let slotHead = 0;
    if (closed) for (let i = 0; i < Math.min(t.concurrency, n); i++) slots.push(0);
    let finishedSeen = 0;
    const heap = new StepHeap(K);
    const inHeap = new Uint8Array(K);
    const inStep = new Uint8Array(K);
    const busy = new Float64Array(K);
    const area = new LoadArea(K, 0);
    const batch = emptyStepBatch();
    batch.dpRanks = p.replay.dpSize;
    const view: FleetView = {
      engines: K,
      maxRunning: engineSlots(p),
      load: (e) => engines[e]!.load,
      running: (e) => engines[e]!.running,
      queued: (e) => engines[e]!.queued,
    };
    const every = Math.max(1, Math.floor(n / 200));
    const onProgress = p.replayOptions.onProgress;
    const model = t.model;
    let next = 0;
    let lastEnd = -Infinity;
    for (;;) {
      const tA = next >= n ? Infinity : closed ? (slotHead < slots.length ? slots[slotHead]! : Infinity) : clock.arrivalMs[next]!;
      const tE = heap.peekTime();
      if (tA === Infinity && tE === Infinity) break;
      if (tA <= tE) {
        const r = next++;
        if (closed) {
          clock.arrivalMs[r] = tA;
          slotHead++;
        }
        const e = router.route(new LazyRequest(r, trace[r]!, Math.floor(tA), p.replay.blockSize, p.replay.seed), view);
        if (!Number.isInteger(e) || e < 0 || e >= K) throw new RangeError(`router ${router.name} answered ${String(e)} for request ${r}; engines are 0 to ${K - 1}`);
        clock.engineOf[r] = e;
        area.advance(tA);
        engines[e]!.enqueue(r);
        area.set(e, engines[e]!.load);
        if (inHeap[e] === 0) {
          inHeap[e] = 1;
          heap.push(e, tA);
        }
        if (r % every === 0) onProgress?.(r, n);
        continue;
      }
      const e = heap.pop();
      inHeap[e] = 0;
      const eng = engines[e]!;
      area.advance(tE);
      if (inStep[e] === 1) {
        inStep[e] = 0;
        eng.end(tE);
        clock.stepEnded(e, tE);
        eng.flushEvents(this.events, e, (originMs + tE) / 1000, eng.steps - 1);
      }
      if (eng.load > 0) {
        eng.begin(tE, batch);
        const ms = model.stepMs(batch);
        if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
          throw new RangeError(`timing model ${model.name} answered ${describe(ms)} ms for a step (${JSON.stringify(batch)}); a step takes a finite number of ms >= 0`);
        }
        if (!(tE + ms <= MAX_CLOCK_MS)) {
          throw new RangeError(`timing model ${model.name} answered ${ms} ms for a step beginning at ${tE} ms (${JSON.stringify(batch)}): it would end past the clock's range of 2^53 - 1 ms after the first arrival`);
        }
        busy[e] += ms;
        if (tE + ms > lastEnd) lastEnd = tE + ms;
        inStep[e] = 1;
        inHeap[e] = 1;
        heap.push(e, tE + ms);
      }
      area.set(e, eng.load);
      if (closed) for (; finishedSeen < clock.finished; finishedSeen++) slots.push(tE);
    }
    for (const [i, eng] of engines.entries()) {
      eng.drain();
      eng.flushEvents(this.events, i, 0, eng.steps);
    }
    // Every request is served, rejected or cut short by now; one that is not would be missing from every figure.
    for (let r = 0; r < n; r++) if (!clock.isFinished(r)) throw new Error(`timed fleet: request ${r} neither finished nor was refused (a bug in the ${t.scheduler} scheduler)`);
    onProgress?.(n, n);
    const perEngine = engines.map((eng, i) => engineFigures(i, eng.result(this.config), eng.finishedEarly));
    const steps = engines.reduce((a, eng) => Math.max(a, eng.steps), 0);
    const run = assembleRun(this.config, n, perEngine, this.delays, steps, area.areaMax, area.areaSum);
    const figures = engines.map((eng, i) => ({ ...eng.figures(i), busyMs: Math.round(busy[i]! * 1e3) / 1e3 }));
    const sum = (k: 'prefillTokens' | 'cachedTokens' | 'hostLoadedBlocks' | 'preemptions') => figures.reduce((a, f) => a + f[k], 0);
    const latency = clock.figures(
      lastEnd,
      { timing: t.model.name, scheduler: t.scheduler, originMs, prefillTokens: sum('prefillTokens'), cachedTokens: sum('cachedTokens'), hostLoadedBlocks: sum('hostLoadedBlocks'), preemptions: sum('preemptions') },
      figures,
    );
    const { warnings, ...rest } = run;
    return { ...rest, latency, warnings };
  }

  dispose(): void {
    for (const e of this.engines) e.dispose();
  }
}
