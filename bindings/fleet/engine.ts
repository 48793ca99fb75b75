// One engine of a fleet: a pool of replay()'s mode driven by the replay
// kernel's stepper, fed one request at a time from its own FIFO queue. The
// kernel's rules decide everything that happens in the pool; this file only
// decides *when* a queued request is admitted (docs/fleet.md, queueing).

import type { BlockManagerPool } from '../pool/block-manager-pool.js';
import type { ReplaySequence } from '../replay/kernel.js';
import { openReplay, type OpenReplay, type ParsedReplayOptions, type ReplayConfig, type ReplayRun } from '../replay/replay.js';
import { ReplayStepper, type ReplayStep } from '../replay/stepper.js';
import type { TraceRequest } from '../replay/trace.js';
import type { EngineEvents } from './engine-events.js';
import type { FleetConfig } from './fleet-options.js';
import type { StepEngine } from './step-engine.js';

/** A request the kernel holds (its blocks are the pool's until the kernel finishes it). */
interface Resident {
  /** First step at which it no longer decodes: admitted at t, it decodes through t + max(outputLength, 1) - 1. */
  doneStep: number;
  /** Decoding: admitted, not done, and not finished early by the kernel. */
  active: boolean;
  /** Its request's index. */
  r: number;
}

/** Told when a request stops decoding (a timed fleet stamps its finish). */
export interface StopObserver {
  /** `early`: the kernel finished it to make room before its decoding ended. */
  stopped(r: number, early: boolean): void;
}

export class FleetEngine implements StepEngine {
  readonly open: OpenReplay;
  private readonly stepper: ReplayStepper<ReplaySequence>;
  private readonly maxRunning: number;
  /** Request indices waiting, FIFO. */
  private queue: number[] = [];
  private qHead = 0;
  /** The kernel's running FIFO, mirrored (oldest at rHead). */
  private resident: Resident[] = [];
  private rHead = 0;
  /** Residents by the step they stop decoding. */
  private readonly doneAt = new Map<number, Resident[]>();
  /** Requests decoding now. */
  running = 0;
  /** Requests routed here. */
  routed = 0;
  /** Sequences the kernel finished while they still decoded (to make room after a failed allocation). */
  finishedEarly = 0;

  /**
   * `observer`: told when a request stops (a timed fleet stamps its finish);
   * with one, a request the kernel truncated stops decoding after the tokens
   * it gave (`ReplayStep.outputs`) rather than at the step its output would
   * have ended (the step clock's rule, kept without an observer).
   */
  constructor(p: ParsedReplayOptions, recordEvents: boolean, private readonly observer?: StopObserver) {
    this.open = openReplay(p);
    try {
      if (recordEvents) this.open.pool.recordEvents(true);
      const { blockSize, maxRunning, publishAfterPrefill } = p;
      this.stepper = new ReplayStepper(this.open.target, [], { blockSize, maxRunning, publishAfterPrefill });
      this.maxRunning = maxRunning;
    } catch (e) {
      this.open.pool.dispose();
      throw e;
    }
  }

  get pool(): BlockManagerPool {
    return this.open.pool;
  }

  get queued(): number {
    return this.queue.length - this.qHead;
  }

  /** Running plus queued: what routers and the imbalance figure call load. */
  get load(): number {
    return this.running + this.queued;
  }

  /** Requests the kernel holds (decoding or done but not yet finished). */
  get residents(): number {
    return this.resident.length - this.rHead;
  }

  enqueue(r: number): void {
    this.queue.push(r);
    this.routed++;
  }

  /** Start of step `t`: requests whose decoding ended stop counting as running. */
  tick(t: number): void {
    const list = this.doneAt.get(t);
    if (list === undefined) return;
    this.doneAt.delete(t);
    for (const x of list) {
      if (!x.active) continue;
      x.active = false;
      this.running--;
      this.observer?.stopped(x.r, false);
    }
  }

  /**
   * Step `t` on this engine: admits queued requests in order while a slot is
   * free (fewer than maxRunning residents, or the oldest resident done
   * decoding: the kernel then finishes it to make room), then finishes the
   * residents done by `t` from the oldest on. `wait(r)` is told each admission,
   * `placed(r, step)` what the kernel made of it.
   */
  admit(t: number, requests: readonly TraceRequest[], wait: (r: number) => void, placed?: (r: number, step: ReplayStep) => void): void {
    while (this.qHead < this.queue.length) {
      if (this.residents >= this.maxRunning && this.resident[this.rHead]!.doneStep > t) break;
      const r = this.queue[this.qHead++]!;
      wait(r);
      const req = requests[r]!;
      const step = this.stepper.admitRequest(req, r);
      this.retire(step);
      if (step.placed) {
        const tokens = this.tokensOf(req, step);
        this.place(t + tokens, r, tokens > 0);
      }
      placed?.(r, step);
    }
    if (this.qHead > 1024 && this.qHead * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.qHead);
      this.qHead = 0;
    }
    // A request whose decoding ended is finished (its blocks cached, the rest
    // freed), oldest first, stopping at the first that still decodes: the
    // kernel's running list is a FIFO. With requests still queued this finds
    // nothing (the loop above stopped at a head that decodes).
    while (this.residents > 0 && this.resident[this.rHead]!.doneStep <= t) {
      this.stepper.finishOldestRunning();
      this.retire({ finished: 1 });
    }
  }

  /** The kernel finished `step.finished` residents, oldest first. */
  private retire(step: Pick<ReplayStep, 'finished'>): void {
    for (let i = 0; i < step.finished; i++) {
      const x = this.resident[this.rHead++]!;
      if (x.active) {
        x.active = false;
        this.running--;
        this.finishedEarly++;
        this.observer?.stopped(x.r, true);
      }
    }
    if (this.rHead > 1024 && this.rHead * 2 > this.resident.length) {
      this.resident = this.resident.slice(this.rHead);
      this.rHead = 0;
    }
  }

  /** The dp rank of the sequence admitted last (0 where the target's sequences have none). */
  newestRank(): number {
    return (this.stepper.newest() as { dpRank?: number } | undefined)?.dpRank ?? 0;
  }

  /** Tokens a placed request gives: max(outputLength, 1), or (timed) the outputs a truncated one decoded. */
  tokensOf(req: TraceRequest, step: ReplayStep): number {
    return this.observer !== undefined && step.truncated ? step.outputs : Math.max(req.outputLength, 1);
  }

  /** Admitted at doneStep - its tokens; a request that gives none (truncated at once) is done already and never runs. */
  private place(doneStep: number, r: number, active: boolean): void {
    const x: Resident = { doneStep, active, r };
    this.resident.push(x);
    if (!active) return;
    this.running++;
    let list = this.doneAt.get(doneStep);
    if (list === undefined) this.doneAt.set(doneStep, (list = []));
    list.push(x);
  }

  /** After the last request: the kernel finishes every resident, oldest first. */
  drain(): void {
    const step = this.stepper.step();
    if (step !== null) this.retire(step);
  }

  /** The engine's replay result (as replay() reports one), under `config` (an xllm fleet's: every replay field is there). */
  result(config: ReplayConfig | FleetConfig): ReplayRun {
    return this.open.finish(this.stepper.result(), config as ReplayConfig);
  }

  flushEvents(events: EngineEvents, i: number, ts: number, step: number): void {
    events.flush(i, this.open.pool, ts, step);
  }

  dispose(): void {
    this.open.pool.dispose();
  }
}
