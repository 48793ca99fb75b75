// A fleet engine under scheduler 'xllm' on the millisecond clock: the step
// clock's engine (the replay kernel admits, exactly as there), each of its
// steps timed by the model (docs/fleet-time.md, scheduler xllm). A request
// admitted in step a prefills its uncached prompt and gives its first token
// at the end of step a, then one token per step through step a + T - 1,
// T = max(outputLength, 1) as on the step clock, or for a request the
// kernel truncated the outputs it decoded before its allocation failed.

import type { ParsedReplayOptions, ReplayConfig, ReplayRun } from '../replay/replay.js';
import type { ReplayStep } from '../replay/stepper.js';
import type { TraceRequest } from '../replay/trace.js';
import { addChunk, addDecode, clearStepBatch, type StepBatch } from '../timing/timing-model.js';
import { FleetEngine } from './engine.js';
import type { EngineEvents } from './engine-events.js';
import type { RequestClock, TimedEngineFigures } from './fleet-latency.js';
import type { FleetConfig } from './fleet-options.js';
import { hostLoaded, type TimedEngine } from './timed-engine.js';

/** Per-request state of the kernel's timed engines, one set for the fleet (a request runs on one engine). */
export class KernelScratch {
  readonly decoding: Uint8Array;
  readonly admitStep: Float64Array;
  /** Prompt tokens the caches held at admission (device hits and host loads): not computed. */
  readonly cachedOf: Float64Array;
  /** Tokens it gives (T). */
  readonly tokensOf: Float64Array;
  /** The dp rank its sequence runs on. */
  readonly rankOf: Int32Array;
  constructor(n: number) {
    this.decoding = new Uint8Array(n);
    this.admitStep = new Float64Array(n);
    this.cachedOf = new Float64Array(n);
    this.tokensOf = new Float64Array(n);
    this.rankOf = new Int32Array(n);
  }
}

export class KernelTimedEngine implements TimedEngine {
  private readonly e: FleetEngine;
  private k = 0;
  /** 1 while a step is in flight (begun, not ended). */
  private inStep = 0;
  private stepMs = 0;
  /**
   * The requests decoding, in admission order (the kernel's running FIFO;
   * one stopped since the last step leaves at the next); request r's context
   * at step k is its prompt length - its admission step + k.
   */
  private readonly decoders: number[] = [];
  /** Admitted this step: first token at its end; those with more tokens to give then decode. */
  private readonly admitted: number[] = [];
  private nAdmitted = 0;
  private readonly decoding: Uint8Array;
  private readonly admitStep: Float64Array;
  private readonly cachedOf: Float64Array;
  private readonly tokensOf: Float64Array;
  private readonly rankOf: Int32Array;
  private prefill = 0;
  private cached = 0;
  private host = 0;
  private hostSeen = 0;
  private readonly hostTier: boolean;
  private readonly B: number;
  /** With a host tier: the blocks it had loaded before the admission being made. */
  private loadedBefore = 0;
  private readonly wait = (r: number) => {
    this.clock.admittedMs[r] = this.stepMs;
    this.queueDelay(r, this.k - this.clock.queuedStep[r]!);
    if (this.hostTier) this.loadedBefore = hostLoaded(this.e.pool);
  };
  private readonly placed = (r: number, step: ReplayStep) => {
    const tokens = step.placed ? this.e.tokensOf(this.trace[r]!, step) : 0;
    // Rejected, or truncated before its first token: it computes nothing and leaves now.
    if (tokens === 0) {
      this.clock.finish(r, this.stepMs, 0);
      return;
    }
    this.tokensOf[r] = tokens;
    this.rankOf[r] = this.e.newestRank();
    // Not computed: the device's prefix hits and the blocks the host tier loaded back (the admission's only loads).
    const loaded = this.hostTier ? hostLoaded(this.e.pool) - this.loadedBefore : 0;
    this.cachedOf[r] = (step.matchedBlocks + loaded) * this.B;
    this.admitStep[r] = this.k;
    this.admitted[this.nAdmitted++] = r;
  };

  constructor(
    p: ParsedReplayOptions,
    events: boolean,
    private readonly trace: readonly TraceRequest[],
    private readonly clock: RequestClock,
    private readonly queueDelay: (r: number, steps: number) => void,
    scratch: KernelScratch,
  ) {
    this.B = p.blockSize;
    ({ decoding: this.decoding, admitStep: this.admitStep, cachedOf: this.cachedOf, tokensOf: this.tokensOf, rankOf: this.rankOf } = scratch);
    this.e = new FleetEngine(p, events, this);
    this.hostTier = p.hostBlocks > 0;
  }

  get pool(): FleetEngine['pool'] {
    return this.e.pool;
  }
  get running(): number {
    return this.e.running;
  }
  get queued(): number {
    return this.e.queued;
  }
  get load(): number {
    return this.e.load;
  }
  get steps(): number {
    return this.k;
  }
  get finishedEarly(): number {
    return this.e.finishedEarly;
  }

  enqueue(r: number): void {
    // Steps begun so far: the one in flight counts, it began before the request arrived.
    this.clock.queuedStep[r] = this.k + this.inStep;
    this.e.enqueue(r);
  }

  /** The kernel stopped request r: at the end of its last step, or (early) before the step beginning now. */
  stopped(r: number, early: boolean): void {
    const c = this.clock;
    this.decoding[r] = 0;
    const tokens = early ? this.k - this.admitStep[r]! : this.tokensOf[r]!;
    c.tokenRun(r, this.admitStep[r]!, tokens);
    c.finish(r, this.stepMs, tokens);
  }

  begin(ms: number, batch: StepBatch): void {
    clearStepBatch(batch);
    this.stepMs = ms;
    this.inStep = 1;
    this.e.admit(this.k, this.trace, this.wait, this.placed);
    const c = this.clock;
    for (let i = 0; i < this.nAdmitted; i++) {
      const r = this.admitted[i]!;
      // The kernel finished, to make room, a request this very step admits: it computes nothing and gives no token.
      if (c.isFinished(r)) continue;
      addChunk(batch, this.trace[r]!.inputLength - this.cachedOf[r]!, this.cachedOf[r]!, this.rankOf[r]!);
      batch.cachedTokens += this.cachedOf[r]!;
    }
    const list = this.decoders;
    let w = 0;
    for (let i = 0; i < list.length; i++) {
      const r = list[i]!;
      if (this.decoding[r] === 0) continue;
      list[w++] = r;
      addDecode(batch, this.trace[r]!.inputLength - this.admitStep[r]! + this.k, this.rankOf[r]!);
    }
    while (list.length > w) list.pop();
    if (this.hostTier) {
      const h = hostLoaded(this.e.pool);
      batch.hostLoadedBlocks = h - this.hostSeen;
      this.hostSeen = h;
    }
    this.prefill += batch.prefillTokens;
    this.cached += batch.cachedTokens;
    this.host += batch.hostLoadedBlocks;
  }

  end(ms: number): void {
    const c = this.clock;
    this.stepMs = ms;
    this.inStep = 0;
    for (let i = 0; i < this.nAdmitted; i++) {
      const r = this.admitted[i]!;
      if (c.isFinished(r)) continue; // stopped early, in its own admission step
      c.firstTokenMs[r] = ms;
      if (this.tokensOf[r]! >= 2) {
        this.decoding[r] = 1;
        this.decoders.push(r);
      }
    }
    this.nAdmitted = 0;
    this.k++;
    // Decoding that ended with this step stops now, not when the engine next steps.
    this.e.tick(this.k);
    // An engine going idle finishes its done sequences now (their blocks cached), as the step clock's next step would.
    if (this.e.load === 0) this.e.admit(this.k, this.trace, this.wait, this.placed);
  }

  drain(): void {
    this.e.drain();
  }

  flushEvents(events: EngineEvents, i: number, ts: number, step: number): void {
    events.flush(i, this.e.pool, ts, step);
  }

  result(config: ReplayConfig | FleetConfig): ReplayRun {
    return this.e.result(config);
  }

  figures(engine: number): Omit<TimedEngineFigures, 'utilisation'> {
    return { engine, steps: this.k, busyMs: 0, prefillTokens: this.prefill, cachedTokens: this.cached, hostLoadedBlocks: this.host, preemptions: 0 };
  }

  dispose(): void {
    this.e.dispose();
  }
}
