import { defineConfig } from 'vitest/config';

/**
 * Files that replace a module with `vi.mock`: a mock lives in the module cache, so these run isolated (a
 * fresh module cache each), never in a worker whose cache the other files share. Any new file that calls
 * `vi.mock` belongs here (test/architecture.test.ts checks it).
 */
export const MOCKING = ['test/api/episode-replay.test.ts', 'test/api/dashboard-replay.test.ts', 'test/cli/evals-compare.test.ts', 'test/training/transfer-counters.test.ts'];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: keep the pool small so heavy suites (onnxruntime, Chromium) do not starve each other.
    maxWorkers: 2,
    pool: 'forks',
    projects: [
      {
        extends: true,
        test: {
          name: 'shared',
          include: ['test/**/*.test.ts'],
          exclude: MOCKING,
          // Files share their worker's process and module cache rather than each paying for a fresh fork and
          // import (docs/BENCHMARKS.md, "The test suite"); so a file restores any process.env it sets.
          isolate: false,
        },
      },
      { extends: true, test: { name: 'isolated', include: MOCKING, isolate: true } },
    ],
  },
});
