// The property tests' run counts. `npm test` runs the counts the tests name;
// `.ci/run` sets KVPOOL_SOAK (a whole-number factor) to run each of them that
// many times over, a longer soak than a developer waits for. Mutation runs
// (vitest.mutation.config.ts) set KVPOOL_RUNS_DIVISOR to run a fraction of
// them instead: every mutant re-runs the tests that cover it, and the full
// counts would make a run of one file take many hours.

function wholeEnv(name: string): number {
  const v = Number(process.env[name] ?? '1');
  if (!Number.isInteger(v) || v < 1) throw new Error(`${name} must be a whole number >= 1, got ${process.env[name]}`);
  return v;
}

const factor = wholeEnv('KVPOOL_SOAK');
const divisor = wholeEnv('KVPOOL_RUNS_DIVISOR');

/** Whether this run is the CI soak. */
export const soaking = factor > 1;

/** `n` runs, divided by KVPOOL_RUNS_DIVISOR in mutation runs (at least 1). */
export function fewer(n: number): number {
  return Math.max(1, Math.ceil(n / divisor));
}

/** `numRuns` for a property: `n`, times the soak factor in CI (divided in mutation runs). */
export function soak(n: number): number {
  return fewer(n * factor);
}
