/**
 * `esopt bench lora` at the tiny preset with the smallest settings (a check that it runs and reports what it
 * says, not a measurement): through the CLI with --json, full and lora side by side with positive, finite
 * ratios and the adapters' real size; a bad flag is a usage error naming it; and the memory probe trains in
 * lora mode in a child process and reports its peak RSS (and refuses lora options in another mode).
 */
import { describe, expect, it } from 'vitest';
import { LoraOptions } from '../../shared/lora.ts';
import { runChild } from '../../trainer/studies/bench/memory.ts';
import { main } from '../../trainer/cli/main.ts';
import { loraMatrices } from '../../trainer/engine/model/lora-matrices.ts';
import { openModel } from '../../trainer/engine/model/open-model.ts';

function run(argv: string[]) {
  let out = '';
  let err = '';
  const io = { stdout: (t: string) => void (out += `${t}\n`), stderr: (t: string) => void (err += `${t}\n`), readStdin: async () => '' };
  return main(argv, io).then((code) => ({ code, out, err }));
}

describe('bench lora', () => {
  it('reports full and lora side by side', async () => {
    const r = await run(['bench', 'lora', '--model', 'tiny', '--lora-rank', '4', '--lora-alpha', '8', '--targets', 'q_proj,v_proj', '--population', '2', '--prompt-tokens', '4', '--new-tokens', '4', '--repeats', '1', '--memory-iterations', '0', '--json']);
    expect(r.code).toBe(0);
    const out = JSON.parse(r.out);
    const { layout } = loraMatrices(openModel({ preset: 'tiny', seed: 0 }), LoraOptions.parse({ rank: 4, alpha: 8, targets: { include: ['q_proj,v_proj'] } }));
    expect(out.lora).toEqual({ rank: 4, alpha: 8, targets: { include: ['q_proj,v_proj'], exclude: [] }, matrices: 4, adapter_parameters: layout.length });
    for (const side of [out.full, out.lora_mode]) {
      for (const k of ['switch_ms', 'episode_ms', 'switch_ratio', 'tokens_per_s', 'tokens_ratio']) expect(Number.isFinite(side[k]) && side[k] > 0, k).toBe(true);
      expect(side.switch_ratio).toBeCloseTo(side.switch_ms / side.episode_ms, 10);
      expect(side.tokens_ratio).toBeCloseTo(side.tokens_per_s / out.base_tokens_per_s, 10);
      expect(side.rss_ratio).toBeNull();
    }
    expect(out.serve_peak_rss_mib).toBeNull();
    expect(await run(['bench', 'lora', '--lora-rank', '0'])).toMatchObject({ code: 2, err: expect.stringContaining('--lora-rank: Too small') });
  }, 30_000);

  it('the memory probe trains in lora mode', async () => {
    const lora = LoraOptions.parse({ rank: 2, alpha: 4 });
    const probe = await runChild({ workload: 'train', mode: 'lora', lora, model: 'tiny', population: 2, batch: 1, promptTokens: 4, newTokens: 4, iterations: 1, fullModeWeights: 'inputs' });
    expect(probe.maxRssKiB).toBeGreaterThan(10 * 1024);
    // the inference child LoRA is compared with: the plain model as a server holds it, the population's rows in one call
    const serve = await runChild({ workload: 'serve', mode: 'lora', lora, model: 'tiny', population: 2, batch: 1, promptTokens: 4, newTokens: 4, iterations: 1, fullModeWeights: 'inputs' });
    expect(serve.maxRssKiB).toBeGreaterThan(10 * 1024);
    await expect(runChild({ workload: 'train', mode: 'full', lora, model: 'tiny', population: 2, batch: 1, promptTokens: 4, newTokens: 4, iterations: 1, fullModeWeights: 'inputs' })).rejects.toThrow(/memory probe \(train\) exited 1/);
  }, 30_000);

  it('a memory child reports its own peak, not the resident set of the parent that spawned it', async () => {
    // getrusage's maxRSS of a spawned child starts at the parent's resident set at the fork (bench lora's
    // parent holds a model); the probe reads its own high-water mark instead
    const held = Buffer.alloc(1_200_000_000, 1);
    const probe = await runChild({ workload: 'generate', mode: 'full', model: 'tiny', population: 2, batch: 1, promptTokens: 4, newTokens: 4, iterations: 1, fullModeWeights: 'inputs' });
    expect(held[held.length - 1]).toBe(1);
    expect(probe.maxRssKiB).toBeGreaterThan(10 * 1024);
    expect(probe.maxRssKiB).toBeLessThan(600 * 1024);
  }, 30_000);
});
