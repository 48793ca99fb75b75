// One engine of a fleet running vLLM v1's scheduler and block pool
// (docs/engines.md): a VllmEngine with its dp ranks in lockstep, fed the
// requests routed to it. It serves both clocks. On the step clock
// (docs/fleet.md, a fleet of vLLM engines) each fleet step is one vLLM step
// (schedule, then complete) when the engine has work. On the millisecond
// clock (docs/fleet-time.md, engine 'vllm') `begin` schedules a step and
// reports its batch, the batch the scheduler built being exactly what the
// timing model is charged, and `end` completes it: the tokens it sampled
// and the requests it finished are stamped with the step's end; a request
// the engine drops (one that can never fit) leaves when the step that drops
// it begins.

import type { TraceRequest } from '../replay/trace.js';
import type { StepBatch } from '../timing/timing-model.js';
import type { VllmEngine } from '../vllm/engine.js';
import type { VllmKvCacheManager } from '../vllm/kv-cache-manager.js';
import { openVllmEngine, type OpenVllmEngine } from '../vllm/open-engine.js';
import { vllmReplayConfig, vllmRunOf, type ParsedVllmReplayOptions, type VllmReplayRun } from '../vllm/replay.js';
import { engineFigures } from '../vllm/replay-loop.js';
import { VllmRequest } from '../vllm/request.js';
import type { EngineEvents } from './engine-events.js';
import type { RequestClock, TimedEngineFigures } from './fleet-latency.js';
import type { FleetConfig } from './fleet-options.js';

/** Per-request flags of a fleet's vLLM engines, one array for the fleet (a request runs on one engine). */
export class VllmScratch {
  /** 1 once the request was first scheduled (admitted), or dropped without ever being scheduled. */
  readonly admitted: Uint8Array;
  constructor(n: number) {
    this.admitted = new Uint8Array(n);
  }
}

export class VllmFleetEngine {
  private readonly open: OpenVllmEngine;
  readonly engine: VllmEngine;
  private readonly admitted: Uint8Array;
  /** Requests routed here. */
  private routed = 0;
  /** Steps begun. */
  private k = 0;
  private prefill = 0;
  private cached = 0;
  private preempted = 0;

  /**
   * `clock` (the millisecond clock) is stamped as the engine runs; without
   * one the engine runs on the step clock and tells `wait` its admissions.
   */
  constructor(
    private readonly p: ParsedVllmReplayOptions,
    events: boolean,
    private readonly trace: readonly TraceRequest[],
    scratch: VllmScratch,
    private readonly clock?: RequestClock,
    private readonly queueDelay?: (r: number, steps: number) => void,
  ) {
    this.open = openVllmEngine(p);
    this.engine = this.open.engine;
    this.admitted = scratch.admitted;
    if (events) for (const kv of this.open.kvs) kv.recordEvents(true);
  }

  /** The engine's KV-cache managers, rank r's at index r. */
  get kvs(): readonly VllmKvCacheManager[] {
    return this.open.kvs;
  }

  /** Requests in its schedulers' running lists (prefilling or decoding), every rank. */
  get running(): number {
    return this.engine.running;
  }
  /** Requests waiting (new ones, and preempted ones to recompute), every rank. */
  get queued(): number {
    return this.engine.waiting;
  }
  get load(): number {
    return this.engine.running + this.engine.waiting;
  }
  /** Steps begun. */
  get steps(): number {
    return this.k;
  }
  /** Requests dropped after giving tokens (truncated): the vllm engine finishes none early otherwise. */
  get finishedEarly(): number {
    let n = 0;
    for (const s of this.engine.schedulers) n += s.counts.truncated;
    return n;
  }

  /** Queues request `r` on the rank vLLM's balancer picks now. */
  enqueue(r: number): void {
    // Steps begun so far (the one in flight included: it began before the request arrived).
    if (this.clock !== undefined) this.clock.queuedStep[r] = this.k;
    this.engine.add(new VllmRequest(r, this.trace[r]!));
    this.routed++;
  }

  /** The step clock's start of a step: nothing (a vLLM request is finished by the step that samples its last token). */
  tick(_t: number): void {}

  /** Step `t` on the step clock: one vLLM step, if the engine has work; `wait(r)` is told each request admitted first (or dropped unadmitted). */
  admit(t: number, _requests: readonly TraceRequest[], wait: (r: number) => void): void {
    if (!this.engine.hasWork) return;
    this.engine.schedule(null);
    this.k++;
    this.afterSchedule(wait, t);
    this.engine.complete();
  }

  /** First admissions of the step just scheduled, and its drops. */
  private afterSchedule(wait: (r: number) => void, ms: number): void {
    const flags = this.admitted;
    for (const s of this.engine.schedulers) {
      const list = s.scheduled;
      // vLLM schedules running requests first: the step's admissions are at the end.
      for (let i = list.length - s.stepAdmitted; i < list.length; i++) {
        const r = list[i]!.index;
        if (flags[r] === 0) {
          flags[r] = 1;
          wait(r);
        }
      }
      const d = s.dropped;
      if (d === null) continue;
      if (flags[d.index] === 0) {
        flags[d.index] = 1;
        wait(d.index);
      }
      this.clock?.finish(d.index, ms, d.numOutputs);
    }
  }

  private readonly timedWait = (r: number): void => {
    const c = this.clock!;
    c.admittedMs[r] = this.stepMs;
    this.queueDelay!(r, this.k - 1 - c.queuedStep[r]!);
  };
  private stepMs = 0;

  /** Begins a timed step at `ms`: schedules it (its pool operations) and fills `batch` with what every rank computes. */
  begin(ms: number, batch: StepBatch): void {
    this.stepMs = ms;
    this.engine.schedule(batch);
    this.k++;
    this.afterSchedule(this.timedWait, ms);
    for (const s of this.engine.schedulers) this.preempted += s.stepPreempted;
    this.prefill += batch.prefillTokens;
    this.cached += batch.cachedTokens;
  }

  /** The timed step begun last ended at `ms`: each request it sampled gives a token, those done finish. */
  end(ms: number): void {
    const c = this.clock!;
    const step = this.k - 1;
    for (const s of this.engine.schedulers) {
      const list = s.scheduled;
      for (let i = 0; i < list.length; i++) {
        const req = list[i]!;
        // A prefill chunk that does not complete its tokens samples nothing.
        if (req.numComputed < req.numTokens) continue;
        if (req.numOutputs === 0) c.firstTokenMs[req.index] = ms;
        c.token(req.index, step);
      }
    }
    this.engine.complete();
    for (const s of this.engine.schedulers) for (const req of s.finished) c.finish(req.index, ms, req.numOutputs);
  }

  /** After the run: nothing is held (every request finished or was dropped). */
  drain(): void {}

  /** Hands the step's KV events (every rank's, in rank order) to the router and the sink. */
  flushEvents(events: EngineEvents, i: number, ts: number, step: number): void {
    events.flushVllm(i, this.open.kvs, ts, step);
  }

  /** The engine's result, as replay({ engine: 'vllm' }) reports one (its requests: those routed to it). */
  result(config: Pick<FleetConfig, 'trace'>): VllmReplayRun {
    const c = vllmReplayConfig(this.p, config.trace === 'workload' ? undefined : config.trace);
    return vllmRunOf(c, engineFigures(this.engine, this.routed, 0, this.open.idChecksum));
  }

  figures(engine: number): Omit<TimedEngineFigures, 'utilisation'> {
    return { engine, steps: this.k, busyMs: 0, prefillTokens: this.prefill, cachedTokens: this.cached, hostLoadedBlocks: 0, preemptions: this.preempted };
  }

  dispose(): void {
    this.open.dispose();
  }
}
