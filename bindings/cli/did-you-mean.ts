// "did you mean ...?" for a value the command line does not take: the
// closest of the values it does take, when it is a likely typo.

/** Edit distance (insertions, deletions, substitutions, and swaps of neighbours). */
function distance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...new Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}

/** '; did you mean "default"?' when `value` is within a typo (or a change of case) of one of `choices`, else ''. */
export function didYouMean(value: string, choices: readonly string[]): string {
  const v = value.toLowerCase();
  let best: string | undefined;
  let bestD = Infinity;
  for (const c of choices) {
    const d = distance(v, c.toLowerCase());
    if (d < bestD) [best, bestD] = [c, d];
  }
  // A third of the word, at least one edit: "defualt", "roundrobin", "contnuous"; not "x" for "lru".
  return best !== undefined && value !== best && bestD <= Math.max(1, Math.floor(best.length / 3)) ? `; did you mean ${JSON.stringify(best)}?` : '';
}
