// What a timed fleet run adds to its result (docs/fleet-time.md, the
// figures): per request its arrival, admission, first token and finish in
// milliseconds and the engine steps that gave its tokens, and over the run
// TTFT, TPOT, ITL (every gap between tokens), end-to-end latency and
// queueing as vLLM's benchmark defines them, throughput and each engine's
// utilisation. Times count from the run's first arrival.

import { latencyFigures, type LatencyFigures } from './latency-figures.js';
import type { TimedScheduler } from './timed-options.js';

export type { LatencyFigures } from './latency-figures.js';

export interface TimedEngineFigures {
  engine: number;
  /** Steps the engine ran. */
  steps: number;
  /** Milliseconds its steps took, rounded to 1e-3. */
  busyMs: number;
  /** busyMs / the run's durationMs, both as rounded (rounded to 1e-6). */
  utilisation: number;
  /** Prompt tokens it computed (recomputed ones included). */
  prefillTokens: number;
  /** Prompt tokens a cache held, so not computed. */
  cachedTokens: number;
  /** Blocks its host tier loaded back to the device. */
  hostLoadedBlocks: number;
  /** Sequences it preempted (scheduler 'continuous'; recomputed later). */
  preemptions: number;
}

/**
 * Each request's times, in trace order (null: it never got there, e.g.
 * rejected), in ms from the run's first arrival; with what it takes to
 * recompute every figure (tokenTimesMs gives a request's token times).
 */
export interface RequestTimes {
  arrivalMs: number[];
  /** When it was admitted (its first prefill step began), or rejected. */
  admittedMs: Array<number | null>;
  firstTokenMs: Array<number | null>;
  /** When it left its engine: its last token, or the moment it was rejected or cut short. */
  finishMs: Array<number | null>;
  /** Output tokens it produced. */
  outputTokens: number[];
  /** The engine it was routed to. */
  engine: number[];
  /**
   * The steps of its engine at whose end it gave its tokens, as runs
   * `[firstStep, count, firstStep, count, ...]` of consecutive steps (one run
   * unless steps passed without giving it a token: a preemption, or a step
   * that did not reach it; empty when it gave none): token times are
   * `stepEndMs[engine][step]`.
   */
  tokenSteps: number[][];
  /** Per engine, when each of its steps ended: step k at `stepEndMs[e][k]`. */
  stepEndMs: number[][];
}

export interface FleetLatency {
  /** The timing model's name. */
  timing: string;
  /** The engines' scheduler: xllm, continuous, or vllm (engine 'vllm'). */
  scheduler: TimedScheduler;
  /**
   * Where the run's clock starts, in the trace's milliseconds: the first
   * request's arrival (its timestamp / speedup; 0 in a closed loop or
   * without timestamps). Every other time here counts from it.
   */
  originMs: number;
  /** From the first arrival to the last finish or the end of the last step, whichever is later (rounded to 1e-3). */
  durationMs: number;
  /** Requests that produced at least one token. */
  completed: number;
  outputTokens: number;
  /** First token minus arrival, per request that produced one. */
  ttftMs: LatencyFigures;
  /** Time per output token: per request with two tokens or more, (last token - first token) / (tokens - 1). */
  tpotMs: LatencyFigures;
  /** Inter-token latency: every gap between two consecutive tokens of a request, over all requests. */
  itlMs: LatencyFigures;
  /** Last token minus arrival, per request that produced one. */
  e2eMs: LatencyFigures;
  /** Admission (or rejection) minus arrival. */
  queueMs: LatencyFigures;
  /** outputTokens per second of durationMs as rounded (rounded to 1e-3). */
  outputTokensPerSecond: number;
  /** completed per second of durationMs (rounded to 1e-3). */
  requestsPerSecond: number;
  prefillTokens: number;
  cachedTokens: number;
  hostLoadedBlocks: number;
  preemptions: number;
  engines: TimedEngineFigures[];
  requests: RequestTimes;
}

/** The times of request `r`'s tokens, in order (ms from the run's first arrival). */
export function tokenTimesMs(t: RequestTimes, r: number): number[] {
  const ends = t.stepEndMs[t.engine[r]!] ?? [];
  const runs = t.tokenSteps[r] ?? [];
  const out: number[] = [];
  for (let i = 0; i < runs.length; i += 2) for (let k = 0; k < runs[i + 1]!; k++) out.push(ends[runs[i]! + k]!);
  return out;
}

/** Per-request clocks of a timed run, filled by the engines as they step. */
export class RequestClock {
  readonly arrivalMs: Float64Array;
  readonly admittedMs: Float64Array;
  readonly firstTokenMs: Float64Array;
  readonly finishMs: Float64Array;
  readonly tokens: Float64Array;
  /** Engine steps begun on its engine when each request was queued (its queueing in steps counts from there). */
  readonly queuedStep: Float64Array;
  readonly engineOf: Int32Array;
  /** Its first run of token steps (start, length; length 0: no token yet) and the step of its last token. */
  private readonly runStart: Float64Array;
  private readonly runLen: Float64Array;
  private readonly lastStep: Float64Array;
  /** Runs after the first (flat pairs), for the few requests preempted between tokens; `split` marks them. */
  private readonly moreRuns = new Map<number, number[]>();
  private readonly split: Uint8Array;
  /** Per engine, the end of each step (grown by doubling) and how many ended. */
  private readonly stepEnds: Float64Array[];
  private readonly stepsEnded: Int32Array;

  /** Requests finished (or rejected) so far. */
  finished = 0;

  constructor(readonly n: number, engines: number) {
    this.arrivalMs = new Float64Array(n).fill(NaN);
    this.admittedMs = new Float64Array(n).fill(NaN);
    this.firstTokenMs = new Float64Array(n).fill(NaN);
    this.finishMs = new Float64Array(n).fill(NaN);
    this.tokens = new Float64Array(n);
    this.queuedStep = new Float64Array(n);
    this.engineOf = new Int32Array(n);
    this.runStart = new Float64Array(n);
    this.runLen = new Float64Array(n);
    this.lastStep = new Float64Array(n);
    this.split = new Uint8Array(n);
    this.stepEnds = Array.from({ length: engines }, () => new Float64Array(64));
    this.stepsEnded = new Int32Array(engines);
  }

  isFinished(r: number): boolean {
    return !Number.isNaN(this.finishMs[r]!);
  }

  finish(r: number, ms: number, tokens: number): void {
    this.finished++;
    this.finishMs[r] = ms;
    this.tokens[r] = tokens;
  }

  /** Engine `e`'s next step (its steps ended so far) ended at `ms`. */
  stepEnded(e: number, ms: number): void {
    const k = this.stepsEnded[e]!;
    let ends = this.stepEnds[e]!;
    if (k === ends.length) {
      const grown = new Float64Array(k * 2);
      grown.set(ends);
      this.stepEnds[e] = ends = grown;
    }
    ends[k] = ms;
    this.stepsEnded[e] = k + 1;
  }

  /** Request `r` gave a token at the end of step `k` of its engine. */
  token(r: number, k: number): void {
    const len = this.runLen[r]!;
    if (len === 0) {
      this.runStart[r] = k;
      this.runLen[r] = 1;
    } else if (k === this.lastStep[r]! + 1 && this.split[r] === 0) this.runLen[r] = len + 1;
    else {
      this.split[r] = 1;
      let more = this.moreRuns.get(r);
      if (more === undefined) this.moreRuns.set(r, (more = []));
      if (k === this.lastStep[r]! + 1) more[more.length - 1]!++;
      else more.push(k, 1);
    }
    this.lastStep[r] = k;
  }

  /** Request `r` gave `count` tokens at the ends of steps `first` to `first + count - 1` of its engine. */
  tokenRun(r: number, first: number, count: number): void {
    if (count === 0) return;
    this.runStart[r] = first;
    this.runLen[r] = count;
    this.lastStep[r] = first + count - 1;
  }

  /** Each run of request r's token steps, as flat pairs. */
  private runsOf(r: number): number[] {
    if (this.runLen[r] === 0) return [];
    const first = [this.runStart[r]!, this.runLen[r]!];
    return this.split[r] === 0 ? first : first.concat(this.moreRuns.get(r)!);
  }

  /** The run's figures, from the first arrival (0) to the last finish or `lastStepEnd`, whichever is later. */
  figures(
    lastStepEnd: number,
    base: Pick<FleetLatency, 'timing' | 'scheduler' | 'originMs' | 'prefillTokens' | 'cachedTokens' | 'hostLoadedBlocks' | 'preemptions'>,
    engines: Omit<TimedEngineFigures, 'utilisation'>[],
  ): FleetLatency {
    const n = this.n;
    const ttft = new Float64Array(n);
    const tpot = new Float64Array(n);
    const e2e = new Float64Array(n);
    const queue = new Float64Array(n);
    let gaps = 0;
    for (let r = 0; r < n; r++) if (this.tokens[r]! >= 2) gaps += this.tokens[r]! - 1;
    const itl = new Float64Array(gaps);
    let nt = 0, np = 0, ni = 0, nq = 0, tokens = 0;
    let last = lastStepEnd;
    for (let r = 0; r < n; r++) {
      const a = this.arrivalMs[r]!;
      const q = this.admittedMs[r]!;
      if (!Number.isNaN(q)) queue[nq++] = q - a;
      const end = this.finishMs[r]!;
      if (!Number.isNaN(end) && end > last) last = end;
      const k = this.tokens[r]!;
      tokens += k;
      if (k === 0) continue;
      const ends = this.stepEnds[this.engineOf[r]!]!;
      const f = this.firstTokenMs[r]!;
      const lastToken = ends[this.lastStep[r]!]!;
      ttft[nt++] = f - a;
      e2e[nt - 1] = lastToken - a;
      if (k < 2) continue;
      tpot[np++] = (lastToken - f) / (k - 1);
      // Every gap: within a run, one step's length; between runs, the wait a preemption cost.
      let prev = NaN;
      const runs = this.runsOf(r);
      for (let i = 0; i < runs.length; i += 2) {
        const s = runs[i]!;
        const c = runs[i + 1]!;
        if (!Number.isNaN(prev)) itl[ni++] = ends[s]! - prev;
        for (let j = 1; j < c; j++) itl[ni++] = ends[s + j]! - ends[s + j - 1]!;
        prev = ends[s + c - 1]!;
      }
    }
    const durationMs = n === 0 ? 0 : round3(Math.max(0, last));
    const perSecond = (x: number) => (durationMs === 0 ? 0 : round3(x / (durationMs / 1000)));
    const opt = (v: Float64Array) => Array.from(v, (x) => (Number.isNaN(x) ? null : x));
    return {
      ...base,
      durationMs,
      completed: nt,
      outputTokens: tokens,
      ttftMs: latencyFigures(ttft, nt),
      tpotMs: latencyFigures(tpot, np),
      itlMs: latencyFigures(itl, ni),
      e2eMs: latencyFigures(e2e, nt),
      queueMs: latencyFigures(queue, nq),
      outputTokensPerSecond: perSecond(tokens),
      requestsPerSecond: perSecond(nt),
      engines: engines.map((e) => ({ ...e, utilisation: durationMs === 0 ? 0 : Math.round((e.busyMs / durationMs) * 1e6) / 1e6 })),
      requests: {
        arrivalMs: Array.from(this.arrivalMs),
        admittedMs: opt(this.admittedMs),
        firstTokenMs: opt(this.firstTokenMs),
        finishMs: opt(this.finishMs),
        outputTokens: Array.from(this.tokens),
        engine: Array.from(this.engineOf),
        tokenSteps: Array.from({ length: n }, (_, r) => this.runsOf(r)),
        stepEndMs: this.stepEnds.map((ends, e) => plainArray(ends, this.stepsEnded[e]!)),
      },
    };
  }
}

/** The first `n` values as a plain array (a loop: Array.from over a typed array is several times slower, on millions of step ends). */
function plainArray(v: Float64Array, n: number): number[] {
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) out[i] = v[i]!;
  return out;
}

function round3(x: number): number {
  return Math.round(x * 1e3) / 1e3;
}
