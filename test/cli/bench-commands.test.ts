import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { benchmarks } from '../../trainer/studies/bench/index.ts';
import { main } from '../../trainer/cli/main.ts';
import { registry } from '../../trainer/cli/registry.ts';
import { savePreset } from '../../trainer/engine/model/open-model.ts';

function run(argv: string[]) {
  let out = '';
  let err = '';
  const io = { stdout: (t: string) => void (out += `${t}\n`), stderr: (t: string) => void (err += `${t}\n`), readStdin: async () => '' };
  return main(argv, io).then((code) => ({ code, out, err }));
}

describe('benchmarks in their own room', () => {
  it('no benchmark module imports the CLI', () => {
    const dir = 'trainer/studies/bench';
    for (const file of readdirSync(dir).filter((f) => f.endsWith('.ts'))) {
      const imports = [...readFileSync(join(dir, file), 'utf8').matchAll(/(?:from|import\()\s*'([^']+)'/g)].map((m) => m[1]);
      expect(imports.filter((i) => i.includes('/cli/')), file).toEqual([]);
    }
  });

  it('every benchmark is a command whose summary is the list’s, and --help prints it', async () => {
    for (const b of benchmarks) expect(registry.find((e) => e.name === b.name)?.summary, b.name).toBe(b.summary);
    const help = await run(['bench', 'full', '--help']);
    expect(help.code).toBe(0);
    expect(help.out).toContain(benchmarks.find((b) => b.name === 'bench full')?.summary);
    expect(help.out).toContain('--model');
  });

  it('a bad option is a usage error naming the flag', async () => {
    expect(await run(['bench', 'lowrank', '--rank', '65'])).toMatchObject({ code: 2, err: expect.stringContaining('--rank: Too big') });
    expect(await run(['bench', 'server', '--provider', 'tpu'])).toMatchObject({ code: 2, err: expect.stringContaining('--provider: Invalid option') });
    expect(await run(['bench', 'noise', '--bogus'])).toMatchObject({ code: 2, err: expect.stringContaining("'--bogus'") });
    expect(await run(['bench', 'memory', '--population', '3'])).toMatchObject({ code: 2, err: expect.stringContaining('--population: must be even') });
    expect(await run(['bench', 'full', '--batches', '1;8'])).toMatchObject({ code: 2, err: expect.stringContaining('--batches: comma-separated batch sizes (got "1;8")') });
  });

  it('bench prefix plays one episode with the prefix cache and without: same replies, far fewer tokens prefilled', async () => {
    const r = await run(['bench', 'prefix', '--model', 'tiny', '--turns', '4', '--new-tokens', '6', '--repeats', '1', '--json']);
    expect(r.code).toBe(0);
    const out = JSON.parse(r.out);
    expect(out.same_replies).toBe(true);
    expect(out.per_turn).toHaveLength(4);
    expect(out.without_cache.prefilled_tokens).toBe(out.prompt_tokens);
    expect(out.with_cache.prefilled_tokens).toBe(out.prompt_tokens - out.cached_tokens);
    expect(out.with_cache.prefilled_per_episode_token).toBeLessThan(out.without_cache.prefilled_per_episode_token / 2);
    expect(await run(['bench', 'prefix', '--episode', 'chess'])).toMatchObject({ code: 2, err: expect.stringContaining('--episode: Invalid option') });
  }, 60_000);

  it('bench context caps each point at the model context and reports decode ms/token and the prefill rate, unfused and fused, with equal tokens', async () => {
    const r = await run(['bench', 'context', '--model', 'tiny', '--contexts', '16,64,100000', '--new-tokens', '4', '--repeats', '1', '--json']);
    expect(r.code).toBe(0);
    const out = JSON.parse(r.out);
    expect(out.points.map((p: { context: number }) => p.context)).toEqual([16, 64, out.max_context]);
    for (const p of out.points) {
      expect(p.prompt_tokens).toBe(p.context - 4);
      expect(p.variants.map((v: { name: string }) => v.name)).toEqual(['unfused', 'fused']);
      expect(p.tokens_equal).toBe(true);
      for (const v of p.variants) {
        expect(v.decode_ms_per_token).toBeGreaterThan(0);
        expect(v.prefill_tokens_per_s).toBeGreaterThan(0);
      }
    }
    expect(out.machine.load).toHaveLength(3);
    expect(await run(['bench', 'context', '--contexts', '4', '--new-tokens', '8'])).toMatchObject({ code: 1 });
    expect(await run(['bench', 'context', '--contexts', '64;128'])).toMatchObject({ code: 2, err: expect.stringContaining('--contexts: comma-separated context lengths') });
  }, 60_000);

  it('bench lowrank takes --model DIR (an export directory) and --model PRESET alike', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'esopt-bench-model-'));
    try {
      savePreset(dir, 'tiny', 0);
      const small = ['--batches', '2', '--prompt-tokens', '4', '--new-tokens', '2', '--repeats', '1', '--json'];
      const fromDir = await run(['bench', 'lowrank', '--model', dir, ...small]);
      expect(fromDir.code).toBe(0);
      const a = JSON.parse(fromDir.out);
      expect(a.model).toBe(dir);
      const fromPreset = JSON.parse((await run(['bench', 'lowrank', '--model', 'tiny', ...small])).out);
      expect(fromPreset.model).toBe('tiny');
      expect(a.parameters).toBe(fromPreset.parameters);
      expect(a.perturbed_matrices).toBe(fromPreset.perturbed_matrices);
      expect(a.batches[0].ratio).toBeGreaterThan(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
