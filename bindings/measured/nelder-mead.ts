// Nelder and Mead's simplex search, for calibrate's few parameters: it needs
// no gradient, which a replay's figures do not have (they move in steps as
// a request lands in one engine step or the next). Deterministic: the same
// function gives the same answer. (No maintained JavaScript package offers
// a derivative-free minimiser; this is the textbook method, with the usual
// coefficients: reflection 1, expansion 2, contraction and shrink 1/2.)

export interface SimplexResult {
  x: number[];
  value: number;
  evaluations: number;
}

export interface SimplexOptions {
  /** The first simplex: x0 and x0 moved by step[i] along each axis i. */
  step: readonly number[];
  /** Stop after this many evaluations of f. */
  maxEvaluations: number;
  /** Stop when the simplex's values are within this of each other. */
  tolerance: number;
}

export function nelderMead(f: (x: number[]) => number, x0: readonly number[], o: SimplexOptions): SimplexResult {
  const n = x0.length;
  let evaluations = 0;
  const eval_ = (x: number[]) => {
    evaluations++;
    return f(x);
  };
  const pts: number[][] = [[...x0]];
  for (let i = 0; i < n; i++) pts.push(x0.map((v, j) => (i === j ? v + o.step[i]! : v)));
  const vals = pts.map(eval_);
  const order = () => {
    const idx = pts.map((_, i) => i).sort((a, b) => vals[a]! - vals[b]! || a - b);
    const p = idx.map((i) => pts[i]!);
    const v = idx.map((i) => vals[i]!);
    pts.splice(0, pts.length, ...p);
    vals.splice(0, vals.length, ...v);
  };
  order();
  while (evaluations < o.maxEvaluations && vals[n]! - vals[0]! > o.tolerance) {
    const centroid = Array.from({ length: n }, (_, j) => pts.slice(0, n).reduce((a, p) => a + p[j]!, 0) / n);
    const worst = pts[n]!;
    const along = (t: number) => centroid.map((c, j) => c + t * (worst[j]! - c));
    const xr = along(-1);
    const fr = eval_(xr);
    if (fr < vals[0]!) {
      const xe = along(-2);
      const fe = eval_(xe);
      if (fe < fr) (pts[n] = xe), (vals[n] = fe);
      else (pts[n] = xr), (vals[n] = fr);
    } else if (fr < vals[n - 1]!) {
      pts[n] = xr;
      vals[n] = fr;
    } else {
      const outside = fr < vals[n]!;
      const xc = along(outside ? -0.5 : 0.5);
      const fc = eval_(xc);
      if (fc < (outside ? fr : vals[n]!)) {
        pts[n] = xc;
        vals[n] = fc;
      } else {
        for (let i = 1; i <= n; i++) {
          pts[i] = pts[i]!.map((v, j) => pts[0]![j]! + 0.5 * (v - pts[0]![j]!));
          vals[i] = eval_(pts[i]!);
        }
      }
    }
    order();
  }
  return { x: pts[0]!, value: vals[0]!, evaluations };
}
