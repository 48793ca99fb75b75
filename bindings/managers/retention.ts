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
 * The ranges of a sequence whose tokens from `start` on have `priority` for
 * ever (the replay marks each request's generated tokens so), with both
 * already checked: what parseRetention would return, without its checks.
 */
export function retentionFrom(start: number, priority: number): Retention[] {
  return [{ start, end: Infinity, priority, duration: Infinity }];
}

/**
 * Writes (priority, expiry) for blocks first..first+n of block size B into
 * `f64` from index `at` (two numbers per block), `now` being the clock.
 * Each range visits only the blocks it overlaps (a sequence's blocks number
 * in the hundreds, its ranges a few): NaN marks a block no range touched yet.
 */
export function writeRetention(ranges: readonly Retention[], first: number, n: number, B: number, now: number, f64: Float64Array, at: number): void {
  f64.fill(NaN, at, at + 2 * n);
  for (let k = 0; k < ranges.length; k++) {
    const r = ranges[k]!;
    // Blocks b with b*B < r.end and (b+1)*B > r.start.
    const from = rangeFrom(r, first, B);
    const to = rangeTo(r, first, n, B);
    for (let b = from; b < to; b++) {
      const i = at + 2 * (b - first);
      const prio = f64[i]!;
      if (prio !== prio || r.priority > prio || (r.priority === prio && r.duration > f64[i + 1]!)) {
        f64[i] = r.priority;
        f64[i + 1] = r.duration;
      }
    }
  }
  for (let i = at; i < at + 2 * n; i += 2) {
    if (f64[i] !== f64[i]) {
      f64[i] = DEFAULT_PRIORITY;
      f64[i + 1] = Infinity;
    } else f64[i + 1] = now + f64[i + 1]!;
  }
}

/** The first of blocks first..first+n (of B tokens) that range `r` overlaps. */
export function rangeFrom(r: Retention, first: number, B: number): number {
  return Math.max(first, Math.floor(r.start / B));
}

/** One past the last of blocks first..first+n that range `r` overlaps (at most rangeFrom: none). */
export function rangeTo(r: Retention, first: number, n: number, B: number): number {
  return Math.min(first + n, r.end === Infinity ? first + n : Math.ceil(r.end / B));
}
