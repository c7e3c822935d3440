import { describe, expect, it } from 'vitest';
import { spinRate } from '../../trainer/studies/bench/cpu-capacity.ts';

describe('spinRate (the compute control beside bench fanout)', () => {
  it('spins N threads together until one shared deadline and reports their blocks per second', async () => {
    for (const threads of [1, 2]) {
      const t0 = performance.now();
      const rate = await spinRate(threads, 80);
      const elapsed = performance.now() - t0;
      expect(Number.isFinite(rate) && rate > 0, `${threads} thread(s): ${rate}`).toBe(true);
      // Not before the deadline (the threads wait for the start flag, then spin to it), and not long after.
      expect(elapsed).toBeGreaterThanOrEqual(80);
      expect(elapsed).toBeLessThan(10_000);
    }
  });
});
