// Counts the random operations the property and history tests apply (one
// step = one generated operation run on the implementation and on the model,
// then compared). test/setup.ts reports each file's count when the file ends;
// test/support/global-setup.ts prints the run's total. The count is the
// measure of how much random checking one `npm test` does (issue: at least
// 200,000 steps), so a generator that shrinks back to a dozen operations
// shows up in the printed figure.

let count = 0;

/** Records `n` random steps run by the current test file. */
export function countSteps(n = 1): void {
  count += n;
}

/** The steps counted so far in this file, and resets the count. */
export function takeSteps(): number {
  const n = count;
  count = 0;
  return n;
}
