// Token-range priorities for the 'priority' eviction policy (TensorRT-LLM's
// TokenRangeRetentionConfig): a sequence marks token ranges with a priority
// 0-100 (lower evicted first) and optionally how long it holds, in the
// pool's own time units (see setTime). A block caching tokens
// [b*B, (b+1)*B) takes the highest priority among the ranges overlapping it
// (the longest duration among those), DEFAULT_PRIORITY for ever when none does.

import { checkInt, checkObject, checkKeys, describe } from '../validate.js';
import { DEFAULT_PRIORITY } from './eviction-policy.js';

export interface RetentionRange {
  /** First token of the range (default 0). */
  start?: number;
  /** One past its last token (default: no end). */
  end?: number;
  /** 0-100; lower priorities are evicted first (unmarked blocks: 35). */
  priority: number;
  /** How long after the block is cached the priority holds (default: for ever); then it falls back to 35. */
  duration?: number;
}

/** A validated range: [start, end) with end = Infinity when open. */
export interface Retention {
  start: number;
  end: number;
  priority: number;
  duration: number;
}

const KEYS = ['start', 'end', 'priority', 'duration'] as const;

/** Validates a list of ranges (a copy is kept: later edits of the argument change nothing). */
export function parseRetention(name: string, ranges: unknown): Retention[] {
  if (!Array.isArray(ranges)) throw new TypeError(`${name} must be an array of ranges, got ${describe(ranges)}`);
  return ranges.map((r: RetentionRange, i) => {
    const n = `${name}[${i}]`;
    checkObject(n, r);
    checkKeys(n, r, KEYS);
    const start = checkInt(`${n}.start`, r.start ?? 0);
    const end = r.end === undefined ? Infinity : checkInt(`${n}.end`, r.end, start + 1);
    const priority = checkInt(`${n}.priority`, r.priority, 0, 100);
    const d = r.duration ?? Infinity;
    if (typeof d !== 'number') throw new TypeError(`${n}.duration must be a number, got ${describe(d)}`);
    if (!(d >= 0)) throw new RangeError(`${n}.duration must be >= 0, got ${d}`);
    return { start, end, priority, duration: d };
  });
}

/**
 * Writes (priority, expiry) for blocks first..first+n of block size B into
 * `f64` from index `at` (two numbers per block), `now` being the clock.
 */
export function writeRetention(ranges: readonly Retention[], first: number, n: number, B: number, now: number, f64: Float64Array, at: number): void {
  for (let i = 0; i < n; i++) {
    const lo = (first + i) * B;
    const hi = lo + B;
    let prio = DEFAULT_PRIORITY;
    let dur = Infinity;
    let marked = false;
    for (const r of ranges) {
      if (r.start >= hi || r.end <= lo) continue;
      if (!marked || r.priority > prio || (r.priority === prio && r.duration > dur)) {
        prio = r.priority;
        dur = r.duration;
        marked = true;
      }
    }
    f64[at + 2 * i] = prio;
    f64[at + 2 * i + 1] = now + dur;
  }
}
