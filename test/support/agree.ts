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

/** Numbers, strings, booleans, null and undefined by Object.is; arrays and typed arrays element by element; objects key by key. */
function sameValue(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  const al = Array.isArray(a) || ArrayBuffer.isView(a);
  const bl = Array.isArray(b) || ArrayBuffer.isView(b);
  if (al !== bl) return false;
  if (al) {
    const x = a as ArrayLike<unknown>;
    const y = b as ArrayLike<unknown>;
    if (x.length !== y.length) return false;
    for (let i = 0; i < x.length; i++) if (!sameValue(x[i], y[i])) return false;
    return true;
  }
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  for (const k of ka) if (!Object.hasOwn(b, k) || !sameValue((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])) return false;
  return true;
}

/** Typed arrays as plain arrays, deeply (for the diff of a failure). */
function plainDeep(v: unknown): unknown {
  if (ArrayBuffer.isView(v) && !(v instanceof DataView)) return Array.from(v as unknown as ArrayLike<number>);
  if (Array.isArray(v)) return v.map(plainDeep);
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plainDeep(x)]));
  return v;
}

/**
 * `agree` for state snapshots taken many times a step: a typed array equals
 * the plain array of the same numbers (so views need no copy), and the
 * comparison is a plain walk over arrays, objects and primitives.
 */
export function agreeState(actual: unknown, expected: unknown, what?: string): void {
  if (!sameValue(actual, expected)) expect(plainDeep(actual), what).toEqual(plainDeep(expected));
}
