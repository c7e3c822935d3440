import { describe, expect, it } from 'vitest';
import { main } from '../../trainer/cli/main.ts';

function io() {
  const out: string[] = [];
  const err: string[] = [];
  return { out, err, io: { stdout: (t: string) => void out.push(t), stderr: (t: string) => void err.push(t), readStdin: async () => '' } };
}

describe('esopt bench all', () => {
  it('runs the selected benchmark through its own command and gathers its JSON with the load around it', async () => {
    const c = io();
    const code = await main(['bench', 'all', '--only', 'noise', '--json'], c.io);
    const summary = JSON.parse(c.out.join('\n'));
    expect(summary.benchmarks.map((b: { name: string }) => b.name)).toEqual(['bench noise']);
    const [noise] = summary.benchmarks;
    expect(noise.error).toBeNull();
    expect(code).toBe(0);
    expect(noise.result.ratio_vs_add).toBeGreaterThan(0);
    expect(noise.load.before).toBeGreaterThanOrEqual(0);
    expect(summary.machine.cores).toBeGreaterThan(0);
  }, 120_000);

  it('a malformed --only is a usage error naming the flag', async () => {
    const c = io();
    expect(await main(['bench', 'all', '--only', 'No Such', '--json'], c.io)).toBe(2);
    expect(c.err.join('\n')).toMatch(/--only/);
  });
});
