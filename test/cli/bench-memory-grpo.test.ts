import { describe, expect, it } from 'vitest';
import { main } from '../../trainer/cli/main.ts';

function run(argv: string[]) {
  let out = '';
  let err = '';
  const io = { stdout: (t: string) => void (out += `${t}\n`), stderr: (t: string) => void (err += `${t}\n`), readStdin: async () => '' };
  return main(argv, io).then((code) => ({ code, out, err }));
}

describe('esopt bench memory --vs grpo', () => {
  it('rejects an unknown comparison by its flag', async () => {
    expect(await run(['bench', 'memory', '--vs', 'sgd'])).toMatchObject({ code: 2, err: expect.stringContaining('--vs: Invalid option') });
  });

  it('measures an ES iteration and a GRPO step in two children and prints both peaks', { timeout: 120_000 }, async () => {
    const r = await run(['bench', 'memory', '--vs', 'grpo', '--model', 'tiny', '--population', '2', '--batch', '1', '--prompt-tokens', '4', '--new-tokens', '4', '--iterations', '1', '--json']);
    expect(r.code, r.err).toBe(0);
    const out = JSON.parse(r.out);
    expect(out).toMatchObject({ vs: 'grpo', model: 'tiny', population: 2, grpo_error: null });
    expect(out.es_peak_rss_mib).toBeGreaterThan(10);
    expect(out.grpo_peak_rss_mib).toBeGreaterThan(10);
    expect(out.grpo_over_es).toBeCloseTo(out.grpo_peak_rss_mib / out.es_peak_rss_mib, 12);
    // The step ran forward and backward: both rollouts' sequences, distinct, neither cancelled.
    expect(out.grpo_sequences).toBe(2);
    expect(out).not.toHaveProperty('ratio');
  });

  it('takes a float32-state GRPO step with a KL term to a reference model, and refuses a negative β by its flag', { timeout: 120_000 }, async () => {
    expect(await run(['bench', 'memory', '--vs', 'grpo', '--grpo-kl', '-1'])).toMatchObject({ code: 2, err: expect.stringContaining('--grpo-kl') });
    const r = await run(['bench', 'memory', '--vs', 'grpo', '--grpo-state', 'float32', '--grpo-kl', '0.1', '--model', 'tiny', '--population', '2', '--batch', '1', '--prompt-tokens', '4', '--new-tokens', '4', '--iterations', '1', '--json']);
    expect(r.code, r.err).toBe(0);
    expect(JSON.parse(r.out)).toMatchObject({ vs: 'grpo', grpoState: 'float32', grpoKl: 0.1, grpo_error: null, grpo_sequences: 2 });
  });
});
