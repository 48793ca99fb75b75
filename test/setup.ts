// Every test runs against the Node entry: the core loads synchronously from build/.
import '../bindings/wasm-node.js';
import { appendFileSync } from 'node:fs';
import { afterAll, expect, inject } from 'vitest';
import { takeSteps } from './support/steps.js';

// Each file reports its random-step count to the run's global setup.
afterAll(() => {
  const n = takeSteps();
  const file = inject('kvpoolStepsFile');
  if (n > 0 && file) appendFileSync(file, `${expect.getState().testPath ?? 'unknown'}\t${n}\n`);
});
