import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: keep the pool small so heavy suites (onnxruntime, Chromium) do not starve each other.
    maxWorkers: 2,
    pool: 'forks',
  },
});
