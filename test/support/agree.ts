// A fast equality assertion for the per-step comparisons of the differential
// tests. vitest's expect() costs ~10 µs a call in bookkeeping, which at a
// dozen comparisons per step and hundreds of thousands of steps is most of
// the suite's time; a structural comparison first, and expect() only to
// report a difference, keeps the same failure output for a fraction of that.

import { isDeepStrictEqual } from 'node:util';
import { expect } from 'vitest';

/** Fails (with vitest's diff) unless `actual` deeply equals `expected`. */
export function agree(actual: unknown, expected: unknown, what?: string): void {
  if (!isDeepStrictEqual(actual, expected)) expect(actual, what).toEqual(expected);
}
