// The property tests' run counts. `npm test` runs the counts the tests name;
// `.ci/run` sets KVPOOL_SOAK (a whole-number factor) to run each of them that
// many times over, a longer soak than a developer waits for.

const factor = Number(process.env['KVPOOL_SOAK'] ?? '1');
if (!Number.isInteger(factor) || factor < 1) throw new Error(`KVPOOL_SOAK must be a whole number >= 1, got ${process.env['KVPOOL_SOAK']}`);

/** Whether this run is the CI soak. */
export const soaking = factor > 1;

/** `numRuns` for a property: `n`, times the soak factor in CI. */
export function soak(n: number): number {
  return n * factor;
}
