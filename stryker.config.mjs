// Mutation testing of the pool, its ranks and the managers (StrykerJS with its vitest
// runner): `npm run mutate`, outside CI -- a full run takes hours on two
// cores. `npm run mutate -- --mutate bindings/pool/metrics.ts --concurrency 1`
// runs one file on one core (the way the recorded scores were measured).
// The score and the surviving mutants that matter are recorded in
// docs/mutation-testing.md. The Wasm core must be built first (the script
// does it). Stryker 9 is the last line that runs on Node 20.

// KVPOOL_MUTATION_SAMPLE=<fraction>[:<seed>] tests a fixed random sample of
// the mutants (scripts/mutation-sample.mjs) instead of all of them.
const sampled = process.env.KVPOOL_MUTATION_SAMPLE
  ? { checkers: ['sample'], plugins: ['@stryker-mutator/*', './scripts/mutation-sample.mjs'] }
  : {};

/** @type {import('@stryker-mutator/api/core').PartialStrykerOptions} */
export default {
  ...sampled,
  testRunner: 'vitest',
  // The tests that call these folders in this thread, fewer property runs, one seed (see the file).
  vitest: { configFile: 'vitest.mutation.config.ts' },
  mutate: ['bindings/pool/**/*.ts', 'bindings/ranks/**/*.ts', 'bindings/managers/**/*.ts'],
  // Tests run against the files Stryker copies to its sandbox; the Wasm core comes along prebuilt.
  ignorePatterns: ['dist', 'dist-inspector', 'test-results', 'reports', '*.tmp.*'],
  // assembly/ is AssemblyScript (decorators on constants), which Stryker's parser rejects; it is never mutated.
  disableTypeChecks: '{bindings,test}/**/*.ts',
  coverageAnalysis: 'perTest',
  concurrency: 2,
  // A mutant that makes a property test loop (or a worker wait) for ever counts as killed by timeout.
  timeoutMS: 60_000,
  timeoutFactor: 2,
  // event-recorder writes each mutant's result as it is tested (reports/mutation/events):
  // a run stopped part-way still tells which mutants it killed.
  reporters: ['clear-text', 'progress', 'html', 'json', 'event-recorder'],
  eventReporter: { baseDir: 'reports/mutation/events' },
  htmlReporter: { fileName: 'reports/mutation/index.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  thresholds: { high: 90, low: 85, break: null },
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
};
