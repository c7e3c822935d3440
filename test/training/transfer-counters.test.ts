/**
 * `esopt bench transfer`'s measured fields come from the counters, not from sizes the code declares: the
 * Memcpy fields are what the profile parser read from the profiles of the engine's own sessions (the
 * parser is wrapped here to record what it returned), and on the CPU provider they are a measured zero.
 */
import { describe, expect, it, vi } from 'vitest';
import type { MemcpyBytes } from '../../trainer/engine/onnx/session-profile.ts';

const returned: MemcpyBytes[] = [];
vi.mock('../../trainer/engine/onnx/session-profile.ts', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../trainer/engine/onnx/session-profile.ts')>();
  return {
    ...real,
    memcpyInDir: (dir: string) => {
      const m = real.memcpyInDir(dir);
      returned.push(m);
      return m;
    },
  };
});

const { run, options } = await import('../../trainer/studies/bench/transfer.ts');

describe('bench transfer reports what the counters measured', () => {
  it('on the CPU provider: each route and switch carries the parser’s result for its own sessions’ profiles, no Memcpy in any', async () => {
    const out = await run(options.parse({ model: 'tiny', batch: 4, prompt: 8, newTokens: 4, measureOn: 'cpu' }), () => {});
    const reported = [...out.measured!.flatMap((w) => w.routes.map((r) => r.memcpy_nodes)), ...out.member_switch!.map((r) => r.memcpy_nodes)];
    // 2 ways × 2 routes, and the host route's switch (the device route exists on webgpu only)
    expect(reported).toHaveLength(5);
    expect(out.member_switch!.map((r) => r.route)).toEqual(['host']);
    // the very objects the parser returned, in order: nothing set in between
    expect(reported.length).toBe(returned.length);
    reported.forEach((m, i) => expect(m).toBe(returned[i]));
    for (const m of reported) {
      // profiles were read and they recorded the decoder's node runs: the zero is a measurement
      expect(m.profiles).toBeGreaterThanOrEqual(1);
      expect(m.node_runs).toBeGreaterThan(0);
      expect(m).toMatchObject({ host_to_device_bytes: 0, host_to_device_runs: 0, device_to_host_bytes: 0, device_to_host_runs: 0 });
    }
    // no device sessions on the CPU: no device moves to count
    for (const w of out.measured!) for (const r of w.routes) expect(r.gpu_buffer_moves).toBeNull();
  }, 60_000);
});
