import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: keep the pool small so heavy suites (onnxruntime, Chromium) do not starve each other.
    maxWorkers: 2,
    pool: 'forks',
    // Files share their worker's process and module cache rather than each paying for a fresh fork and
    // import (docs/BENCHMARKS.md, "The test suite"); so a file restores any process.env it sets.
    isolate: false,
  },
});
