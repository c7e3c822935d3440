import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { keys, parseRewardKey } from '../../shared/keys.ts';
import { RewardRecord, RunConfig } from '../../shared/schemas/index.ts';
import { jsonSchemas } from '../../shared/schemas/json-schema.ts';

describe('store key layout', () => {
  it('builds the documented keys', () => {
    expect(keys.manifest('r1', 3)).toBe('runs/r1/iterations/00000003/manifest.json');
    expect(keys.reward('r1', 3, 7, 'task-9')).toBe('runs/r1/iterations/00000003/rewards/7/task-9.json');
    expect(keys.reward('r1', 3, 'base', 't')).toBe('runs/r1/iterations/00000003/rewards/base/t.json');
    expect(keys.checkpointWeights('r1', 12)).toBe('runs/r1/checkpoints/00000012/weights.bin');
    expect(keys.log('r1')).toBe('runs/r1/log.jsonl');
  });

  it('round-trips reward keys and one key per (run, iteration, member, task)', () => {
    const id = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_-]{0,20}$/);
    fc.assert(
      fc.property(id, fc.nat(99_999_999), fc.oneof(fc.nat(100_000), fc.constant('base' as const)), id, (run, k, m, task) => {
        const key = keys.reward(run, k, m, task);
        expect(parseRewardKey(key)).toEqual({ run, iteration: k, member: m, task });
        expect(key.startsWith(keys.rewards(run, k))).toBe(true);
      }),
    );
  });

  it('lists iterations in order because they are zero-padded', () => {
    const ks = [10, 2, 100, 1].map((k) => keys.manifest('r', k)).sort();
    expect(ks).toEqual([1, 2, 10, 100].map((k) => keys.manifest('r', k)));
  });

  it('refuses ids that could escape their prefix', () => {
    for (const bad of ['../x', '/abs', 'a/b', '.hidden', '', 'a b', 'x'.repeat(65), 'a\u0000b', '..']) {
      expect(() => keys.reward('run', 0, 0, bad)).toThrow(/invalid task id/);
      expect(() => keys.manifest(bad, 0)).toThrow(/invalid run id/);
    }
    expect(() => keys.manifest('r', -1)).toThrow(/invalid iteration/);
    expect(() => keys.reward('r', 0, -2, 't')).toThrow(/invalid member/);
    expect(parseRewardKey('runs/r/iterations/00000001/rewards/0/../x.json')).toBeNull();
    expect(parseRewardKey('runs/r/iterations/00000001/rewards/0/t.json.tmp')).toBeNull();
  });
});

describe('schemas', () => {
  it('reject bad records with field paths, including non-finite rewards', () => {
    const good = {
      run: 'r', iteration: 0, member: 1, task: 't', reward: 1, steps: 3,
      tokens: { prompt: 10, completion: 5 }, durations: { episodeMs: 5, inferenceMs: 2 },
      cost: { usd: 0, lambdaGbSeconds: 0, gpuSeconds: 0 }, error: null, writtenAt: new Date().toISOString(),
    };
    expect(RewardRecord.parse(good).transcriptKey).toBeNull();
    for (const reward of [Number.NaN, Number.POSITIVE_INFINITY]) {
      const r = RewardRecord.safeParse({ ...good, reward });
      expect(r.success).toBe(false);
      expect(r.error?.issues[0].path).toEqual(['reward']);
    }
    const r = RewardRecord.safeParse({ ...good, tokens: { prompt: -1, completion: 0 } });
    expect(r.error?.issues[0].path).toEqual(['tokens', 'prompt']);
  });

  it('fill RunConfig defaults and refuse unknown fields', () => {
    const cfg = RunConfig.parse({
      environment: { name: 'sudoku' }, model: { preset: 'tiny' }, iterations: 2,
      es: { population: 4, sigma: 0.01, alpha: 0.001 },
    });
    expect(cfg.es.antithetic).toBe(true);
    expect(cfg.es.shaping).toBe('zscore');
    expect(cfg.mode).toBe('full');
    expect(RunConfig.safeParse({ ...cfg, bogus: 1 }).success).toBe(false);
  });

  it('refuse es.episodesPerMember, naming tasks.trainPerIteration; its old default 1 parses and is dropped', () => {
    const input = { environment: { name: 'sudoku' }, model: { preset: 'tiny' }, iterations: 2, es: { population: 4, sigma: 0.01, alpha: 0.001 } } as const;
    const r = RunConfig.safeParse({ ...input, es: { ...input.es, episodesPerMember: 2 } });
    expect(r.error?.issues[0].path).toEqual(['es', 'episodesPerMember']);
    expect(r.error?.issues[0].message).toMatch(/removed.*tasks\.trainPerIteration/);
    const stored = RunConfig.parse({ ...input, es: { ...input.es, episodesPerMember: 1 } });
    expect(stored).toEqual(RunConfig.parse(input));
    expect('episodesPerMember' in stored.es).toBe(false);
  });

  it('export as JSON Schema', () => {
    const all = jsonSchemas();
    expect(Object.keys(all)).toEqual(expect.arrayContaining(['RunConfig', 'IterationManifest', 'EpisodeRequest', 'RewardRecord']));
    expect(JSON.stringify(all.RewardRecord)).toContain('"reward"');
  });

  it('prints them with esopt schemas, one by --name, a bad name refused', async () => {
    const { command } = await import('../../trainer/cli/commands/schemas.ts');
    const out: string[] = [];
    const io = { stdout: (t: string) => out.push(t), stderr: () => {}, readStdin: async () => '' };
    expect(await command.run(['--name', 'RunConfig'], io)).toBe(0);
    const schema = JSON.parse(out.join('')) as { properties: Record<string, unknown>; required: string[] };
    expect(Object.keys(schema.properties)).toEqual(expect.arrayContaining(['environment', 'model', 'es', 'iterations', 'checkpointKeep']));
    expect(schema.required).toEqual(expect.arrayContaining(['environment', 'model', 'es', 'iterations']));
    await expect(command.run(['--name', 'Nope'], io)).rejects.toThrow(/--name/);
  });
});
