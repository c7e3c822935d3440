import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { noise } from '../../shared/noise.ts';
import { main } from '../../trainer/cli/main.ts';

function run(argv: string[], stdin = '') {
  let out = '';
  let err = '';
  const io = { stdout: (t: string) => { out += `${t}\n`; }, stderr: (t: string) => { err += `${t}\n`; }, readStdin: async () => stdin };
  return main(argv, io).then((code) => ({ code, out, err }));
}

describe('esopt CLI: foundation commands', () => {
  it('the binary lists its commands and exits 2 on an unknown one', () => {
    const help = spawnSync(process.execPath, ['trainer/cli/bin.js', '--help'], { encoding: 'utf8' });
    expect(help.status).toBe(0);
    for (const c of ['noise', 'es step', 'bench noise']) expect(help.stdout).toContain(c);
    const bad = spawnSync(process.execPath, ['trainer/cli/bin.js', 'frobnicate'], { encoding: 'utf8' });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('unknown command "frobnicate"');
  });

  it('esopt noise prints the stream values', async () => {
    const r = await run(['noise', '--run-seed', '3', '--iteration', '1', '--member', '2', '--count', '5', '--offset', '4094', '--json']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out).values).toEqual(Array.from(noise({ runSeed: 3, iteration: 1, member: 2 }, 5, 4094)));
  });

  it('esopt noise names the bad flag and exits 2', async () => {
    expect(await run(['noise', '--iteration', '0', '--member', '0', '--count', '3'])).toMatchObject({ code: 2, err: expect.stringContaining('--run-seed is required') });
    expect(await run(['noise', '--run-seed', '-4', '--iteration', '0', '--member', '0', '--count', '3'])).toMatchObject({ code: 2, err: expect.stringContaining('--run-seed') });
    expect(await run(['noise', '--bogus'])).toMatchObject({ code: 2, err: expect.stringContaining("'--bogus'") });
  });

  it('esopt es step applies θ + α/G Σ R̂ᵢεᵢ with ε shown per member', async () => {
    const input = { theta: [0.5, -1, 2, 0], sigma: 0.1, alpha: 0.2, runSeed: 7, iteration: 3, rewards: [1, 0, 0.5, 0.5], antithetic: true, rankShaping: false };
    const r = await run(['es', 'step', '--json'], JSON.stringify(input));
    expect(r.code).toBe(0);
    const out = JSON.parse(r.out);
    expect(out.epsilon).toHaveLength(4);
    expect(out.epsilon[1]).toEqual(out.epsilon[0].map((v: number) => -v));
    const mean = 0.5;
    const std = Math.sqrt((0.25 + 0.25 + 0 + 0) / 4);
    const z = input.rewards.map((x) => (x - mean) / (std + 1e-8));
    expect(out.normalizedRewards).toEqual(z);
    for (let k = 0; k < 4; k++) {
      const byHand = input.theta[k] + (input.alpha / 4) * z.reduce((a, zi, i) => a + zi * out.epsilon[i][k], 0);
      expect(out.theta[k]).toBeCloseTo(byHand, 6);
    }
  });

  it('esopt es step rejects bad input with the field path and exit 2', async () => {
    const bad = await run(['es', 'step', '--json'], JSON.stringify({ theta: [1, 'x'], sigma: 0.1, alpha: 0.1, runSeed: 1, iteration: 0, rewards: [1, 2] }));
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('theta.1');
    const odd = await run(['es', 'step'], JSON.stringify({ theta: [1], sigma: 0.1, alpha: 0.1, runSeed: 1, iteration: 0, rewards: [1, 2, 3], antithetic: true }));
    expect(odd).toMatchObject({ code: 2, err: expect.stringContaining('even number') });
    expect(await run(['es', 'step'], '{not json')).toMatchObject({ code: 2, err: expect.stringContaining('not valid JSON') });
    const extra = await run(['es', 'step'], JSON.stringify({ theta: [1], sigma: 0.1, alpha: 0.1, runSeed: 1, iteration: 0, rewards: [1, 2], extra: 1 }));
    expect(extra).toMatchObject({ code: 2, err: expect.stringContaining('extra') });
  });

  it('esopt bench noise runs and prints the side-by-side figures', async () => {
    const r = await run(['bench', 'noise', '--log2-size', '14', '--repeats', '1', '--threads', '2', '--json']);
    expect(r.code).toBe(0);
    const out = JSON.parse(r.out);
    for (const k of ['params_per_s', 'plain_add_params_per_s', 'ratio_vs_add', 'params_per_s_threads', 'ratio_vs_add_threads']) expect(out[k]).toBeGreaterThan(0);
    expect('ratio_vs_numpy' in out).toBe(true);
  });
});
