// Notes on a trace's timestamps that are probably not what was meant
// (docs/fleet.md, the step clock and arrival): a fleet takes them as
// milliseconds, in trace order, so a trace written in seconds runs a
// thousand times too fast, and a request stamped earlier than one before it
// arrives with that one. Both run; the result's warnings say so.

import type { TraceRequest } from '../replay/trace.js';

/** Below this mean gap between arrivals (ms) the timestamps look like seconds: over 2,000 requests a second. */
const SECONDS_LIKE_GAP_MS = 0.5;
/** Fewer stamped requests say too little about a trace's rate. */
const MIN_STAMPED = 10;

const n0 = (x: number) => x.toLocaleString('en-US', { maximumFractionDigits: 3 });

/** The warnings for the first `n` requests of `trace`, when their arrivals come from the timestamps. */
export function arrivalWarnings(trace: readonly TraceRequest[], n: number): string[] {
  let stamped = 0;
  let first = Infinity;
  let last = -Infinity;
  let early = 0;
  let firstEarly = -1;
  for (let r = 0; r < n; r++) {
    const ts = trace[r]!.timestamp;
    if (ts === undefined) continue;
    stamped++;
    if (ts < last) {
      if (early++ === 0) firstEarly = r;
    } else last = ts;
    if (ts < first) first = ts;
  }
  const out: string[] = [];
  if (early > 0) {
    const ts = trace[firstEarly]!.timestamp!;
    out.push(
      `${early.toLocaleString('en-US')} request${early === 1 ? ' has a timestamp' : 's have timestamps'} earlier than a request before ${early === 1 ? 'it' : 'them'} (the first: request ${firstEarly} at ${n0(ts)} ms): ` +
        'requests arrive in trace order, so each arrives with the latest one before it; sort the trace by timestamp if that is not what you meant',
    );
  }
  const span = last - first;
  if (stamped >= MIN_STAMPED && span > 0 && span < (stamped - 1) * SECONDS_LIKE_GAP_MS) {
    out.push(
      `the trace's ${stamped.toLocaleString('en-US')} timestamps span ${n0(span)} ms, over ${Math.round((stamped - 1) / (span / 1000)).toLocaleString('en-US')} requests a second: ` +
        'timestamps are milliseconds; if the trace\'s are seconds, multiply them by 1,000',
    );
  }
  return out;
}
