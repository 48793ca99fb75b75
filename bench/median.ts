// The median the benches report: the middle of the rounds (for an even
// count, the upper of the two middle ones: a round actually measured).

export const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
