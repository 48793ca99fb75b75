// A second timed fleet, written from docs/fleet-time.md alone (the clock,
// scheduler 'xllm', scheduler 'continuous' and engine 'vllm'), for plain
// pools and the round-robin and least-loaded routers. It shares no code
// with bindings/fleet/: only the pool (docs/pool.md), the replay kernel's
// stepper (docs/replay-kernel.md) and its prompt and output tokens, and
// for engine 'vllm' vLLM's scheduler (bindings/vllm/, checked against
// vLLM's own code) on the reference model's vLLM pool (model/vllm/, not
// the Wasm core); the batch, the admissions and every time stamp are made
// here from the page. Plain arrays and linear scans, written to be read
// against the page; the test compares every request's times with the fleet's.

import { BlockManagerPool } from '../../bindings/pool/block-manager-pool.js';
import type { Sequence } from '../../bindings/pool/sequence.js';
import { outputToken, promptTokens } from '../../bindings/replay/kernel.js';
import { PoolReplayTarget } from '../../bindings/replay/replay.js';
import { ReplayStepper } from '../../bindings/replay/stepper.js';
import type { TraceRequest } from '../../bindings/replay/trace.js';
import { emptyStepBatch, type StepBatch } from '../../bindings/timing/timing-model.js';
import { VllmEngine } from '../../bindings/vllm/engine.js';
import { RUNNING, VllmRequest, WAITING, type VllmRequestStatus } from '../../bindings/vllm/request.js';
import { ModelVllmKv } from './vllm-model-kv.js';

export interface ReferenceOptions {
  trace: readonly TraceRequest[];
  engines: number;
  router: 'round-robin' | 'least-loaded';
  /** 'vllm': engine 'vllm' (vLLM's scheduler and block pool). */
  scheduler: 'xllm' | 'continuous' | 'vllm';
  numBlocks: number;
  blockSize: number;
  dpSize: number;
  maxRunning: number;
  maxNumBatchedTokens: number;
  /** 'vllm' only. */
  longPrefillTokenThreshold?: number;
  /** 'vllm' only (default true). */
  schedulerReserveFullIsl?: boolean;
  speedup: number;
  /** 0: open loop. */
  concurrency: number;
  stepMs: (b: StepBatch) => number;
}

export interface ReferenceResult {
  arrivalMs: number[];
  admittedMs: Array<number | null>;
  firstTokenMs: Array<number | null>;
  finishMs: Array<number | null>;
  outputTokens: number[];
  tokenMs: number[][];
  /** Queueing in steps, per request admitted or rejected, in trace order. */
  queueSteps: number[];
  engines: Array<{ steps: number; busyMs: number }>;
  preemptions: number;
}

/** What an engine tells the clock. */
interface RefEngine {
  load(): number;
  /** Begins step k (the steps begun before it) at t. */
  begin(t: number, k: number): StepBatch;
  end(t: number): void;
}

/** The per-request record both engines fill. */
class Record {
  admittedMs: Array<number | null>;
  firstTokenMs: Array<number | null>;
  finishMs: Array<number | null>;
  outputTokens: number[];
  tokenMs: number[][];
  queuedStep: number[];
  queueSteps: Array<number | null>;
  finished = 0;
  preemptions = 0;
  constructor(n: number) {
    this.admittedMs = Array(n).fill(null);
    this.firstTokenMs = Array(n).fill(null);
    this.finishMs = Array(n).fill(null);
    this.outputTokens = Array(n).fill(0);
    this.tokenMs = Array.from({ length: n }, () => []);
    this.queuedStep = Array(n).fill(0);
    this.queueSteps = Array(n).fill(null);
  }
  admit(r: number, t: number, k: number): void {
    this.admittedMs[r] = t;
    this.queueSteps[r] = k - this.queuedStep[r]!;
  }
  token(r: number, t: number): void {
    if (this.tokenMs[r]!.length === 0) this.firstTokenMs[r] = t;
    this.tokenMs[r]!.push(t);
  }
  finish(r: number, t: number): void {
    this.finishMs[r] = t;
    this.outputTokens[r] = this.tokenMs[r]!.length;
    this.finished++;
  }
}

function addChunk(b: StepBatch, tokens: number, context: number, rank: number): void {
  b.prefillTokens += tokens;
  b.prefillSeqs++;
  b.chunkTokens.push(tokens);
  b.chunkContextTokens.push(context);
  b.chunkRanks.push(rank);
}

function addDecode(b: StepBatch, context: number, rank: number): void {
  b.decodeSeqs++;
  b.decodeContextTokens += context;
  b.decodeContexts.push(context);
  b.decodeRanks.push(rank);
}

function newBatch(dp: number): StepBatch {
  const b = emptyStepBatch();
  b.dpRanks = dp;
  return b;
}

/** Scheduler 'xllm': the kernel admits; a request admitted in step a gives tokens at the ends of steps a .. a + T - 1. */
class XllmEngine implements RefEngine {
  private readonly stepper: ReplayStepper<Sequence>;
  private readonly queue: number[] = [];
  /** The kernel's running FIFO, mirrored. */
  private readonly residents: Array<{ r: number; a: number; done: number; active: boolean; rank: number; cached: number }> = [];
  private admittedNow: number[] = [];
  private k = 0;
  constructor(private readonly o: ReferenceOptions, private readonly rec: Record, readonly pool: BlockManagerPool) {
    this.stepper = new ReplayStepper(new PoolReplayTarget(pool), [], { blockSize: o.blockSize, maxRunning: o.maxRunning, publishAfterPrefill: false });
  }
  enqueue(r: number): void {
    this.queue.push(r);
  }
  load(): number {
    return this.queue.length + this.residents.filter((x) => x.active).length;
  }
  private finishDone(): void {
    while (this.residents.length > 0 && this.residents[0]!.done <= this.k) {
      this.stepper.finishOldestRunning();
      this.residents.shift();
    }
  }
  begin(t: number, k: number): StepBatch {
    this.k = k;
    this.admittedNow = [];
    const { o, rec } = this;
    while (this.queue.length > 0) {
      if (this.residents.length >= o.maxRunning && this.residents[0]!.done > k) break;
      const r = this.queue.shift()!;
      rec.admit(r, t, k);
      const step = this.stepper.admitRequest(o.trace[r]!, r);
      for (let i = 0; i < step.finished; i++) {
        const x = this.residents.shift()!;
        if (x.active) {
          x.active = false;
          rec.finish(x.r, t);
        }
      }
      if (!step.placed) {
        rec.finish(r, t);
        continue;
      }
      const T = step.truncated ? step.outputs : Math.max(o.trace[r]!.outputLength, 1);
      const rank = this.stepper.newest()!.dpRank;
      this.residents.push({ r, a: k, done: k + T, active: T > 0, rank, cached: step.matchedBlocks * o.blockSize });
      if (T === 0) rec.finish(r, t);
      else this.admittedNow.push(r);
    }
    this.finishDone();
    const b = newBatch(o.dpSize);
    for (const x of this.residents) {
      if (!x.active) continue;
      if (x.a === k) {
        addChunk(b, o.trace[x.r]!.inputLength - x.cached, x.cached, x.rank);
        b.cachedTokens += x.cached;
      }
    }
    // Decodes in any order: the page fixes what each is, not their order.
    for (const x of this.residents) if (x.active && x.a < k) addDecode(b, o.trace[x.r]!.inputLength + (k - x.a), x.rank);
    return b;
  }
  end(t: number): void {
    for (const x of this.residents) if (x.active) this.rec.token(x.r, t);
    this.k++;
    for (const x of this.residents) {
      if (x.active && x.done === this.k) {
        x.active = false;
        this.rec.finish(x.r, t);
      }
    }
    if (this.load() === 0) this.finishDone();
  }
}

interface Job {
  r: number;
  seq: Sequence | null;
  prompt: number;
  computed: number;
  given: number;
  total: number;
  /** Tokens scheduled this step; -1: none. */
  now: number;
  admitted: boolean;
}

/** Scheduler 'continuous', rule by rule. */
class ContinuousEngine implements RefEngine {
  private readonly target: PoolReplayTarget;
  private readonly running: Job[] = [];
  private readonly waiting: Job[] = [];
  constructor(private readonly o: ReferenceOptions, private readonly rec: Record, readonly pool: BlockManagerPool) {
    this.target = new PoolReplayTarget(pool);
  }
  enqueue(r: number): void {
    this.waiting.push({ r, seq: null, prompt: this.o.trace[r]!.inputLength, computed: 0, given: 0, total: Math.max(this.o.trace[r]!.outputLength, 1), now: -1, admitted: false });
  }
  load(): number {
    return this.running.length + this.waiting.length;
  }
  private preempt(j: Job): void {
    this.target.deallocate(j.seq!);
    j.seq = null;
    j.computed = 0;
    j.now = -1;
    j.prompt = this.o.trace[j.r]!.inputLength + j.given;
    this.rec.preemptions++;
    this.waiting.unshift(j);
  }
  private stop(j: Job, t: number): void {
    if (j.seq !== null) this.target.deallocate(j.seq);
    j.seq = null;
    this.rec.finish(j.r, t);
  }
  private sequenceOf(j: Job): Sequence {
    const req = this.o.trace[j.r]!;
    const buf = new Int32Array(req.inputLength + j.total + 1);
    promptTokens(req, buf);
    for (let i = 0; i < j.given; i++) buf[req.inputLength + i] = outputToken(j.r, i);
    return this.target.newSequence(buf, j.prompt);
  }
  begin(t: number, k: number): StepBatch {
    const { o, rec, running, waiting } = this;
    const b = newBatch(o.dpSize);
    let budget = o.maxNumBatchedTokens;
    let preempted = false;
    let i = 0;
    while (i < running.length && budget > 0) {
      const j = running[i]!;
      const s = j.seq!;
      const prefilling = j.computed < j.prompt;
      const n = prefilling ? Math.min(j.prompt - j.computed, budget) : 1;
      const want = prefilling ? j.computed + n : s.numTokens;
      let ok = this.target.allocate(s, want);
      while (!ok) {
        let v = -1;
        for (let x = running.length - 1; x > i; x--) if (running[x]!.seq!.dpRank === s.dpRank) { v = x; break; }
        if (v < 0) break;
        const [victim] = running.splice(v, 1);
        this.preempt(victim!);
        preempted = true;
        ok = this.target.allocate(s, want);
      }
      if (!ok) {
        running.splice(i, 1);
        if (running.slice(0, i).some((x) => x.seq!.dpRank === s.dpRank)) {
          this.preempt(j);
          preempted = true;
          break;
        }
        this.stop(j, t); // truncated
        continue;
      }
      j.now = n;
      budget -= n;
      if (prefilling) addChunk(b, n, j.computed, s.dpRank);
      else addDecode(b, s.numTokens, s.dpRank);
      i++;
    }
    while (!preempted && waiting.length > 0 && running.length < o.maxRunning && budget > 0) {
      const j = waiting[0]!;
      if (Math.ceil(j.prompt / o.blockSize) > o.numBlocks - 1) {
        waiting.shift();
        if (!j.admitted) rec.admit(j.r, t, k);
        this.stop(j, t);
        continue;
      }
      const s = this.sequenceOf(j);
      let ok = this.target.allocate(s, 1);
      const hit = ok ? s.kvCachedTokens : 0;
      const n = Math.min(j.prompt - hit, budget);
      if (ok && !this.target.allocate(s, hit + n)) {
        this.target.deallocate(s);
        ok = false;
      }
      if (!ok) {
        if (running.length > 0) break;
        waiting.shift();
        if (!j.admitted) rec.admit(j.r, t, k);
        this.stop(j, t);
        continue;
      }
      waiting.shift();
      if (!j.admitted) {
        j.admitted = true;
        rec.admit(j.r, t, k);
      }
      j.seq = s;
      j.computed = hit;
      j.now = n;
      running.push(j);
      budget -= n;
      addChunk(b, n, hit, s.dpRank);
      b.cachedTokens += hit;
    }
    return b;
  }
  end(t: number): void {
    for (const j of [...this.running]) {
      if (j.now < 0) continue;
      const s = j.seq!;
      const wasPrefilling = j.computed < j.prompt;
      j.computed += j.now;
      j.now = -1;
      if (wasPrefilling && j.computed < j.prompt) {
        s.kvCachedTokens = j.computed;
        continue;
      }
      s.kvCachedTokens = s.numTokens;
      if (wasPrefilling) this.target.cache(s);
      this.rec.token(j.r, t);
      j.given++;
      if (j.given >= j.total) {
        this.running.splice(this.running.indexOf(j), 1);
        this.stop(j, t);
      } else s.appendToken(outputToken(j.r, j.given - 1));
    }
  }
}

/**
 * Engine 'vllm': vLLM's scheduler on the model's pools, one per dp rank.
 * What the page says of a step: it begins by scheduling every rank; the
 * batch is each rank's scheduled requests in order, a running request that
 * has given a token and lacks only its last one a decode (context: its
 * tokens), every other one a chunk of its scheduled tokens after those it
 * had computed, with the hits of the requests admitted (first time or
 * again) as cached tokens; a request first admitted is admitted at the
 * step's beginning, a dropped one leaves then; at the step's end every
 * scheduled request whose tokens are all computed gives a token, and those
 * that gave their last finish.
 */
class VllmRefEngine implements RefEngine {
  private readonly engine: VllmEngine;
  readonly kvs: ModelVllmKv[];
  private readonly admittedOnce = new Set<number>();
  constructor(private readonly o: ReferenceOptions, private readonly rec: Record) {
    const shared = { h: 0 };
    this.kvs = Array.from({ length: o.dpSize }, () => new ModelVllmKv(o.numBlocks, o.blockSize, shared));
    this.engine = new VllmEngine(this.kvs, {
      maxNumSeqs: o.maxRunning, maxNumBatchedTokens: o.maxNumBatchedTokens, longPrefillTokenThreshold: o.longPrefillTokenThreshold ?? 0, reserveFullIsl: o.schedulerReserveFullIsl ?? true,
    });
  }
  enqueue(r: number): void {
    this.engine.add(new VllmRequest(r, this.o.trace[r]!));
  }
  load(): number {
    let n = 0;
    for (const s of this.engine.schedulers) n += s.running.length + s.waiting.length;
    return n;
  }
  begin(t: number, k: number): StepBatch {
    const before = new Map<VllmRequest, { status: VllmRequestStatus; computed: number; outputs: number }>();
    for (const s of this.engine.schedulers) {
      for (const q of s.running) before.set(q, { status: q.status, computed: q.numComputed, outputs: q.numOutputs });
      for (let i = 0; i < s.waiting.length; i++) {
        const q = s.waiting.at(i)!;
        before.set(q, { status: q.status, computed: q.numComputed, outputs: q.numOutputs });
      }
    }
    this.engine.schedule(null);
    const b = newBatch(this.o.dpSize);
    for (const [rank, s] of this.engine.schedulers.entries()) {
      for (const q of s.scheduled) {
        const was = before.get(q)!;
        // What the step schedules for it, after the tokens it had computed (an admission: its prefix hits).
        const n = q.scheduled;
        const ctx = q.numComputed - n;
        const fromRunning = was.status === RUNNING;
        if (fromRunning && was.outputs > 0 && ctx === q.numTokens - 1) addDecode(b, q.numTokens, rank);
        else {
          addChunk(b, n, ctx, rank);
          if (!fromRunning) b.cachedTokens += ctx;
        }
        if (was.status === WAITING && !this.admittedOnce.has(q.index)) {
          this.admittedOnce.add(q.index);
          this.rec.admit(q.index, t, k);
        }
      }
      this.rec.preemptions += s.stepPreempted;
      const d = s.dropped;
      if (d !== null) {
        if (!this.admittedOnce.has(d.index)) {
          this.admittedOnce.add(d.index);
          this.rec.admit(d.index, t, k);
        }
        this.rec.finish(d.index, t);
      }
    }
    return b;
  }
  end(t: number): void {
    for (const s of this.engine.schedulers) for (const q of s.scheduled) if (q.numComputed >= q.numTokens) this.rec.token(q.index, t);
    this.engine.complete();
    for (const s of this.engine.schedulers) for (const q of s.finished) this.rec.finish(q.index, t);
  }
}

/** The whole timed fleet: arrivals, events in order, routing, steps. */
export function referenceTimedFleet(o: ReferenceOptions): ReferenceResult {
  const n = o.trace.length;
  const rec = new Record(n);
  const pools: BlockManagerPool[] = [];
  const engines: Array<RefEngine & { enqueue(r: number): void }> = [];
  for (let e = 0; e < o.engines; e++) {
    if (o.scheduler === 'vllm') {
      engines.push(new VllmRefEngine(o, rec));
      continue;
    }
    const pool = new BlockManagerPool({ numBlocks: o.numBlocks, blockSize: o.blockSize, dpSize: o.dpSize, seed: 1024 });
    pools.push(pool);
    engines.push(o.scheduler === 'xllm' ? new XllmEngine(o, rec, pool) : new ContinuousEngine(o, rec, pool));
  }
  try {
    // Arrivals: open loop from the timestamps, counted from request 0's; closed loop as requests finish.
    const arrivalMs: number[] = Array(n).fill(0);
    const closed = o.concurrency > 0;
    if (!closed) {
      const t0 = o.trace[0]?.timestamp ?? 0;
      let prev = 0;
      for (let r = 0; r < n; r++) {
        const ts = o.trace[r]!.timestamp;
        if (ts !== undefined) prev = Math.max(prev, (ts - t0) / o.speedup);
        arrivalMs[r] = prev;
      }
    }
    const slots: number[] = closed ? Array(Math.min(o.concurrency, n)).fill(0) : [];
    let next = 0;
    const due: number[] = Array(o.engines).fill(Infinity);
    const inStep: boolean[] = Array(o.engines).fill(false);
    const begun: number[] = Array(o.engines).fill(0);
    const busy: number[] = Array(o.engines).fill(0);
    let routed = 0;
    for (;;) {
      const tA = next >= n ? Infinity : closed ? (slots.length > 0 ? slots[0]! : Infinity) : arrivalMs[next]!;
      let e = -1;
      for (let x = 0; x < o.engines; x++) if (due[x]! < Infinity && (e < 0 || due[x]! < due[e]!)) e = x;
      const tE = e < 0 ? Infinity : due[e]!;
      if (tA === Infinity && tE === Infinity) break;
      if (tA <= tE) {
        const r = next++;
        if (closed) arrivalMs[r] = slots.shift()!;
        let to = 0;
        if (o.router === 'round-robin') to = routed++ % o.engines;
        else for (let x = 1; x < o.engines; x++) if (engines[x]!.load() < engines[to]!.load()) to = x;
        rec.queuedStep[r] = begun[to]!;
        engines[to]!.enqueue(r);
        if (due[to] === Infinity) due[to] = tA;
        continue;
      }
      const finishedBefore = rec.finished;
      const eng = engines[e]!;
      if (inStep[e]) {
        eng.end(tE);
        inStep[e] = false;
      }
      if (eng.load() > 0) {
        const b = eng.begin(tE, begun[e]!);
        begun[e]!++;
        const ms = o.stepMs(b);
        busy[e]! += ms;
        due[e] = tE + ms;
        inStep[e] = true;
      } else due[e] = Infinity;
      if (closed) for (let i = finishedBefore; i < rec.finished; i++) slots.push(tE);
    }
    return {
      arrivalMs, admittedMs: rec.admittedMs, firstTokenMs: rec.firstTokenMs, finishMs: rec.finishMs, outputTokens: rec.outputTokens, tokenMs: rec.tokenMs,
      queueSteps: rec.queueSteps.filter((x): x is number => x !== null),
      engines: begun.map((steps, i) => ({ steps, busyMs: busy[i]! })),
      preemptions: rec.preemptions,
    };
  } finally {
    for (const p of pools) p.dispose();
  }
}
