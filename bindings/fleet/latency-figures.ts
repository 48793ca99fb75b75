// The summary of a latency distribution as vLLM's serving benchmark gives
// it (docs/fleet-time.md, the figures): the mean, percentiles interpolated
// linearly between the closest ranks (numpy's default), and the maximum.
// Over the whole Mooncake trace the ITL has millions of values: the few
// order statistics the percentiles need are selected in linear time
// instead of sorting them all.

/** Milliseconds over the values a figure covers, rounded to 1e-3; all 0 when it covers none. */
export interface LatencyFigures {
  /** Values the figure covers (requests; for ITL, gaps between tokens). */
  count: number;
  mean: number;
  /** Percentiles, linear between the closest ranks as numpy's: at h = (count - 1) × (p / 100), x[⌊h⌋] + (h - ⌊h⌋) × (x[⌊h⌋ + 1] - x[⌊h⌋]), from the upper end when h - ⌊h⌋ ≥ 0.5. */
  p50: number;
  p90: number;
  p95: number;
  p99: number;
  max: number;
}

/** The percentiles every figure gives. */
export const PERCENTILES = [50, 90, 95, 99] as const;

function round3(x: number): number {
  return Math.round(x * 1e3) / 1e3;
}

/** Below this many values a plain sort is as fast as selecting. */
const SORT_BELOW = 1 << 12;

/**
 * Puts the values of sorted positions `ks` (ascending) of `a[lo..hi]` at
 * those positions, as a sort would, by partitioning only the ranges that
 * hold one (Hoare's scheme, median-of-three pivots; a range left after
 * too many rounds is sorted, so the worst case stays n log n).
 */
function selectPositions(a: Float64Array, ks: readonly number[]): void {
  const stack: number[] = [0, a.length - 1, 0, ks.length - 1, 2 * Math.ceil(Math.log2(a.length + 1))];
  while (stack.length > 0) {
    const budget = stack.pop()!;
    const kHi = stack.pop()!;
    const kLo = stack.pop()!;
    const hi = stack.pop()!;
    const lo = stack.pop()!;
    if (kLo > kHi || lo >= hi) continue;
    if (hi - lo < 16 || budget === 0) {
      a.subarray(lo, hi + 1).sort();
      continue;
    }
    const mid = lo + ((hi - lo) >> 1);
    const x = a[lo]!, y = a[mid]!, z = a[hi]!;
    const pivot = x < y ? (y < z ? y : x < z ? z : x) : x < z ? x : y < z ? z : y;
    let i = lo - 1;
    let j = hi + 1;
    for (;;) {
      do i++; while (a[i]! < pivot);
      do j--; while (a[j]! > pivot);
      if (i >= j) break;
      const t = a[i]!;
      a[i] = a[j]!;
      a[j] = t;
    }
    // [lo, j] <= pivot <= [j + 1, hi]: the positions up to j are on the left.
    let split = kLo;
    while (split <= kHi && ks[split]! <= j) split++;
    stack.push(lo, j, kLo, split - 1, budget - 1, j + 1, hi, split, kHi, budget - 1);
  }
}

/** numpy's lerp: exact at both ends, and from the nearer end past the middle. */
function lerp(a: number, b: number, t: number): number {
  const d = b - a;
  return t >= 0.5 ? b - d * (1 - t) : a + d * t;
}

/**
 * The figures of `values[0, count)` (reordered in place). The mean sums the
 * values in their given order; percentiles as numpy.percentile's default
 * ('linear'); everything rounded to 1e-3.
 */
export function latencyFigures(values: Float64Array, count: number): LatencyFigures {
  if (count === 0) return { count: 0, mean: 0, p50: 0, p90: 0, p95: 0, p99: 0, max: 0 };
  const v = values.subarray(0, count);
  let sum = 0;
  let max = -Infinity;
  for (let i = 0; i < count; i++) {
    const x = v[i]!;
    sum += x;
    if (x > max) max = x;
  }
  const at = PERCENTILES.map((p) => (count - 1) * (p / 100));
  if (count < SORT_BELOW) v.sort();
  else {
    const ks = [...new Set(at.flatMap((h) => [Math.floor(h), Math.min(Math.floor(h) + 1, count - 1)]))].sort((a, b) => a - b);
    selectPositions(v, ks);
  }
  const pct = at.map((h) => {
    const lo = Math.floor(h);
    return round3(lerp(v[lo]!, v[Math.min(lo + 1, count - 1)]!, h - lo));
  });
  return { count, mean: round3(sum / count), p50: pct[0]!, p90: pct[1]!, p95: pct[2]!, p99: pct[3]!, max: round3(max) };
}
