// Measured curves and the one interpolation rule the profile model uses on
// every axis (docs/timing.md, interpolation): constant below the first
// point, linear between points, and past the last point along the slope of
// the top octave of the measured range (from the value at half the last x to
// the last point), never falling. The top octave, rather than the last
// segment, because a profile sampled every 16 tokens has a last segment of
// 16 tokens whose slope is noise; on a doubling grid it is the last segment.

/** A curve: x strictly increasing, y at each, and the slope it keeps past its last point. */
export interface Curve {
  readonly x: Float64Array;
  readonly y: Float64Array;
  /** Per unit of x past the last point (>= 0). */
  readonly above: number;
}

/** Index i of the segment [x[i], x[i+1]] holding q, for x[0] < q <= x[n-1]. */
export function segment(x: ArrayLike<number>, q: number): number {
  let lo = 0;
  let hi = x.length - 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (x[mid]! < q) lo = mid;
    else hi = mid;
  }
  return lo;
}

/** Linear interpolation inside the points (q clamped to the first). */
function inside(x: Float64Array, y: Float64Array, q: number): number {
  const n = x.length;
  if (n === 1 || q <= x[0]!) return y[0]!;
  if (q >= x[n - 1]!) return y[n - 1]!;
  const i = segment(x, q);
  const x0 = x[i]!;
  return y[i]! + ((q - x0) * (y[i + 1]! - y[i]!)) / (x[i + 1]! - x0);
}

/**
 * The slope past the last point: from the curve at half the last x (the
 * first point when that is below it) to the last point, at least 0; 0 for
 * a single point.
 */
export function topOctaveSlope(x: Float64Array, y: Float64Array): number {
  const n = x.length;
  if (n === 1) return 0;
  const last = x[n - 1]!;
  const xm = Math.max(last / 2, x[0]!);
  const ym = inside(x, y, xm);
  return Math.max(0, (y[n - 1]! - ym) / (last - xm));
}

/** A curve through points given in increasing x. */
export function curveOf(x: Float64Array, y: Float64Array): Curve {
  return { x, y, above: topOctaveSlope(x, y) };
}

/** The curve at q. */
export function curveAt(c: Curve, q: number): number {
  const n = c.x.length;
  const last = c.x[n - 1]!;
  if (q > last) return c.y[n - 1]! + (q - last) * c.above;
  return inside(c.x, c.y, q);
}

/**
 * The sum of several curves as one curve, exactly: on the union of their
 * points (each curve is linear between them, constant below its own first
 * point, linear past its last), with the sum of their slopes past the end.
 */
export function sumCurves(curves: readonly Curve[]): Curve {
  if (curves.length === 0) return ZERO_CURVE;
  if (curves.length === 1) return curves[0]!;
  const xs = [...new Set(curves.flatMap((c) => [...c.x]))].sort((a, b) => a - b);
  const x = Float64Array.from(xs);
  const y = Float64Array.from(xs, (q) => curves.reduce((a, c) => a + curveAt(c, q), 0));
  return { x, y, above: curves.reduce((a, c) => a + c.above, 0) };
}

export type At<C> = (ctx: C, i: number, a: number, b: number, c: number) => number;

/**
 * Along one axis: f at q from f at the axis' points (`at(ctx, i, ...)`),
 * by the curve rule. Static functions and a context, so that a lookup
 * allocates nothing.
 */
export function along<C>(x: Float64Array, q: number, at: At<C>, ctx: C, a: number, b: number, c: number): number {
  const n = x.length;
  if (n === 1 || q <= x[0]!) return at(ctx, 0, a, b, c);
  const last = x[n - 1]!;
  if (q <= last) return between(x, q, at, ctx, a, b, c);
  const yn = at(ctx, n - 1, a, b, c);
  const xm = Math.max(last / 2, x[0]!);
  const ym = xm <= x[0]! ? at(ctx, 0, a, b, c) : between(x, xm, at, ctx, a, b, c);
  return yn + (q - last) * Math.max(0, (yn - ym) / (last - xm));
}

/** Linear between the two points around q (x[0] < q <= x[n-1]); a point itself exactly. */
function between<C>(x: Float64Array, q: number, at: At<C>, ctx: C, a: number, b: number, c: number): number {
  const i = segment(x, q);
  const x1 = x[i + 1]!;
  if (q === x1) return at(ctx, i + 1, a, b, c);
  const f0 = at(ctx, i, a, b, c);
  return f0 + ((q - x[i]!) * (at(ctx, i + 1, a, b, c) - f0)) / (x1 - x[i]!);
}

/** A curve that is 0 everywhere (an empty sum). */
export const ZERO_CURVE: Curve = { x: Float64Array.of(1), y: Float64Array.of(0), above: 0 };
