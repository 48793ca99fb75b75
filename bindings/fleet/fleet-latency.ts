// What a timed fleet run adds to its result (docs/fleet-time.md, the
// figures): per request its arrival, first token and finish in
// milliseconds, and over the run TTFT, inter-token latency, end-to-end
// latency and queueing (mean and nearest-rank percentiles), throughput and
// each engine's utilisation.

import type { FleetScheduler } from './timed-options.js';

/** Milliseconds over the requests a figure covers, rounded to 1e-3; all 0 when it covers none. */
export interface LatencyFigures {
  /** Requests the figure covers. */
  count: number;
  mean: number;
  /** Nearest rank: the ceil(p/100 * count)-th smallest. */
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

export interface TimedEngineFigures {
  engine: number;
  /** Steps the engine ran. */
  steps: number;
  /** Milliseconds its steps took. */
  busyMs: number;
  /** busyMs / the run's durationMs (rounded to 1e-6). */
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

/** Each request's times, in trace order (null: it never got there, e.g. rejected). */
export interface RequestTimes {
  arrivalMs: number[];
  /** When it was admitted (its first prefill step began). */
  admittedMs: Array<number | null>;
  firstTokenMs: Array<number | null>;
  finishMs: Array<number | null>;
  /** Output tokens it produced. */
  outputTokens: number[];
}

export interface FleetLatency {
  /** The timing model's name. */
  timing: string;
  scheduler: FleetScheduler;
  /** From the first arrival to the last finish or the end of the last step, whichever is later. */
  durationMs: number;
  /** Requests that produced at least one token. */
  completed: number;
  outputTokens: number;
  /** First token minus arrival. */
  ttftMs: LatencyFigures;
  /** Per request with two tokens or more: (finish - first token) / (tokens - 1). */
  itlMs: LatencyFigures;
  /** Finish minus arrival. */
  e2eMs: LatencyFigures;
  /** Admission minus arrival. */
  queueMs: LatencyFigures;
  /** outputTokens per second of durationMs (rounded to 1e-3). */
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

function round3(x: number): number {
  return Math.round(x * 1e3) / 1e3;
}

export function latencyFigures(values: Float64Array, count: number): LatencyFigures {
  if (count === 0) return { count: 0, mean: 0, p50: 0, p90: 0, p99: 0, max: 0 };
  const sorted = values.subarray(0, count).sort();
  let sum = 0;
  for (let i = 0; i < count; i++) sum += sorted[i]!;
  const rank = (p: number) => round3(sorted[Math.max(0, Math.ceil((p / 100) * count) - 1)]!);
  return { count, mean: round3(sum / count), p50: rank(50), p90: rank(90), p99: rank(99), max: round3(sorted[count - 1]!) };
}

/** Per-request clocks of a timed run, filled by the engines as they step. */
export class RequestClock {
  readonly arrivalMs: Float64Array;
  readonly admittedMs: Float64Array;
  readonly firstTokenMs: Float64Array;
  readonly finishMs: Float64Array;
  readonly tokens: Float64Array;
  /** Engine step at which each request was queued (its queueing in steps counts from there). */
  readonly queuedStep: Float64Array;

  constructor(readonly n: number) {
    this.arrivalMs = new Float64Array(n).fill(NaN);
    this.admittedMs = new Float64Array(n).fill(NaN);
    this.firstTokenMs = new Float64Array(n).fill(NaN);
    this.finishMs = new Float64Array(n).fill(NaN);
    this.tokens = new Float64Array(n);
    this.queuedStep = new Float64Array(n);
  }

  /** Requests finished (or rejected) so far. */
  finished = 0;

  isFinished(r: number): boolean {
    return !Number.isNaN(this.finishMs[r]!);
  }

  finish(r: number, ms: number, tokens: number): void {
    this.finished++;
    this.finishMs[r] = ms;
    this.tokens[r] = tokens;
  }

  /** The run's figures, from the first arrival to the last finish or `lastStepEnd`, whichever is later. */
  figures(lastStepEnd: number, base: Omit<FleetLatency, 'durationMs' | 'completed' | 'outputTokens' | 'ttftMs' | 'itlMs' | 'e2eMs' | 'queueMs' | 'outputTokensPerSecond' | 'requestsPerSecond' | 'requests' | 'engines'>, engines: Omit<TimedEngineFigures, 'utilisation'>[]): FleetLatency {
    const n = this.n;
    const ttft = new Float64Array(n);
    const itl = new Float64Array(n);
    const e2e = new Float64Array(n);
    const queue = new Float64Array(n);
    let nt = 0, ni = 0, ne = 0, nq = 0, tokens = 0;
    let first = Infinity, last = lastStepEnd;
    for (let r = 0; r < n; r++) {
      const a = this.arrivalMs[r]!;
      if (a < first) first = a;
      const q = this.admittedMs[r]!;
      if (!Number.isNaN(q)) queue[nq++] = q - a;
      const f = this.firstTokenMs[r]!;
      const end = this.finishMs[r]!;
      if (!Number.isNaN(end) && end > last) last = end;
      tokens += this.tokens[r]!;
      if (Number.isNaN(f)) continue;
      ttft[nt++] = f - a;
      e2e[ne++] = end - a;
      const k = this.tokens[r]!;
      if (k >= 2) itl[ni++] = (end - f) / (k - 1);
    }
    const durationMs = n === 0 ? 0 : round3(Math.max(0, last - first));
    const perSecond = (x: number) => (durationMs === 0 ? 0 : round3(x / (durationMs / 1000)));
    const opt = (v: Float64Array) => Array.from(v, (x) => (Number.isNaN(x) ? null : x));
    return {
      ...base,
      durationMs,
      completed: nt,
      outputTokens: tokens,
      ttftMs: latencyFigures(ttft, nt),
      itlMs: latencyFigures(itl, ni),
      e2eMs: latencyFigures(e2e, ne),
      queueMs: latencyFigures(queue, nq),
      outputTokensPerSecond: perSecond(tokens),
      requestsPerSecond: perSecond(nt),
      engines: engines.map((e) => ({ ...e, utilisation: durationMs === 0 ? 0 : Math.round((e.busyMs / durationMs) * 1e6) / 1e6 })),
      requests: { arrivalMs: Array.from(this.arrivalMs), admittedMs: opt(this.admittedMs), firstTokenMs: opt(this.firstTokenMs), finishMs: opt(this.finishMs), outputTokens: Array.from(this.tokens) },
    };
  }
}
