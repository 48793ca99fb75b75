// A replay's time series in the measured run's terms (docs/validation.md,
// the report): per second, the prompt tokens of the requests whose first
// token came in it (vLLM counts a prompt when its first token is out), the
// tokens generated in it, and the requests running and waiting at its end.

import type { FleetLatency } from '../fleet/fleet-latency.js';

export interface SeriesPoint {
  /** The second's end, s from the first arrival; the point covers (t - 1, t]. */
  t: number;
  promptThroughput: number;
  genThroughput: number;
  running: number;
  waiting: number;
}

/** The series of a one-engine replay of requests with these prompt lengths, a point a second until the last token. */
export function predictedSeries(l: FleetLatency, inputTokens: readonly number[]): SeriesPoint[] {
  const q = l.requests;
  const seconds = Math.max(1, Math.ceil(l.durationMs / 1000));
  const prompt = new Float64Array(seconds + 1);
  const gen = new Float64Array(seconds + 1);
  // Running from admission to the last token, waiting from arrival to admission: changes in count at each second's end.
  const runDelta = new Float64Array(seconds + 2);
  const waitDelta = new Float64Array(seconds + 2);
  const bin = (ms: number) => Math.max(1, Math.ceil(ms / 1000)); // (t - 1, t] -> t
  for (let r = 0; r < q.arrivalMs.length; r++) {
    // Its tokens came at the ends of its runs of engine steps (tokenTimesMs, without the array).
    const ends = q.stepEndMs[q.engine[r]!] ?? [];
    const runs = q.tokenSteps[r] ?? [];
    for (let i = 0; i < runs.length; i += 2) for (let k = 0; k < runs[i + 1]!; k++) gen[Math.min(seconds, bin(ends[runs[i]! + k]!))]! += 1;
    const first = q.firstTokenMs[r];
    if (first !== null && first !== undefined) prompt[Math.min(seconds, bin(first))]! += inputTokens[r] ?? 0;
    const arrival = q.arrivalMs[r]!;
    const admitted = q.admittedMs[r] ?? null;
    const finish = q.finishMs[r] ?? null;
    // A state [a, b) holds at second-ends t with a <= t < b.
    const span = (delta: Float64Array, a: number, b: number) => {
      const lo = Math.ceil(a / 1000);
      const hi = Math.ceil(b / 1000);
      if (hi <= lo) return;
      delta[Math.min(seconds + 1, lo)]! += 1;
      delta[Math.min(seconds + 1, hi)]! -= 1;
    };
    if (admitted === null) continue;
    span(waitDelta, arrival, admitted);
    if (finish !== null) span(runDelta, admitted, finish);
  }
  const out: SeriesPoint[] = [];
  let running = runDelta[0]!;
  let waiting = waitDelta[0]!;
  for (let t = 1; t <= seconds; t++) {
    running += runDelta[t]!;
    waiting += waitDelta[t]!;
    out.push({ t, promptThroughput: prompt[t]!, genThroughput: gen[t]!, running, waiting });
  }
  return out;
}
