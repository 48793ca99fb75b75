// The vitest configuration of mutation runs (stryker.config.mjs): the tests
// that exercise bindings/pool, bindings/ranks and bindings/managers in this
// thread, with a fraction of the property runs and a fixed fast-check seed.
// Stryker runs the dry run and every mutant on one worker, so each second a
// test file takes is paid once per mutant it covers; docs/mutation-testing.md
// lists what is left out and why.

import { readFileSync } from 'node:fs';
import { defineConfig, mergeConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import base from './vitest.config.js';

/**
 * Example-based test files first (smaller first), property tests (the files
 * that import fast-check) last: Stryker stops a mutant's run at its first
 * failing test, and the examples kill most mutants in a second where a
 * property test takes several. vitest's own order puts the slowest files first.
 */
class ExamplesFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const key = (f: TestSpecification) => {
      const text = readFileSync(f.moduleId, 'utf8');
      return (text.includes("from 'fast-check'") ? 1e9 : 0) + text.length;
    };
    return [...files].sort((a, b) => key(a) - key(b) || a.moduleId.localeCompare(b.moduleId));
  }
}

export default mergeConfig(
  base,
  defineConfig({
    test: {
      exclude: [
        // Other runtimes, the packed package, browsers, the inspector, the zmq wire,
        // the CLI and the 4 GiB memory test: none of them calls the pool in this thread.
        'test/architecture.test.ts',
        'test/big-memory.test.ts',
        'test/browser-*.test.ts',
        'test/cli-layout.test.ts',
        'test/inspector-*.test.ts',
        'test/package.test.ts',
        'test/runtimes.test.ts',
        'test/zmq-*.test.ts',
        'test/replay-command.test.ts',
        'test/sweep*.test.ts',
        'test/trace-file.test.ts',
        'test/xxh3.test.ts',
        'test/wasm-default.test.ts',
        // Replays of whole workloads and traces (tens of seconds each); the
        // differential tests compare the same code against the model step by step.
        'test/replay.test.ts',
        'test/replay-events.test.ts',
        'test/hierarchy-replay.test.ts',
        'test/composite-replay.test.ts',
        'test/event-index.test.ts',
        // Worker threads: a mutant is only switched on in the thread Stryker runs
        // the tests in, so these mostly test unmutated code, for seconds each.
        'test/concurrent-history.test.ts',
        'test/concurrent-manager.test.ts',
        'test/xtensor-concurrent.test.ts',
        'node_modules/**',
      ],
      // Added to the base config's setup files (mergeConfig concatenates lists).
      setupFiles: ['./test/support/mutation-setup.ts'],
      env: { KVPOOL_RUNS_DIVISOR: '4' },
      sequence: { sequencer: ExamplesFirst },
    },
  }),
);
