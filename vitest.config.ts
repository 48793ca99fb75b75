import { defineConfig } from 'vitest/config';

// The CI soak (KVPOOL_SOAK = n) runs every property n times over, so its
// tests get n times the time; the timeout is there to catch a hang, and a
// busy machine must not turn a long soak into a failure.
const soak = Number(process.env['KVPOOL_SOAK'] ?? '1');
const timeout = 120_000 * (Number.isInteger(soak) && soak > 1 ? soak : 1);

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    setupFiles: ['./test/setup.ts'],
    globalSetup: ['./test/support/global-setup.ts'],
    testTimeout: timeout,
    hookTimeout: timeout,
  },
});
