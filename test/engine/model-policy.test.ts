import { describe, expect, it } from 'vitest';
import { ask } from '../../shared/es.ts';
import { createEngine } from '../../trainer/engine/model/create-engine.ts';
import { ModelPolicy } from '../../trainer/engine/model/model-policy.ts';
import { samplingSeed } from '../../trainer/engine/generation/sampling-seed.ts';

describe('in-process model policy', () => {
  it('answers a chat as a member, reproducibly per (member, episode, turn), with token counts', async () => {
    const engine = await createEngine({ model: { preset: 'tiny', seed: 2 }, mode: 'lowrank' });
    engine.setPopulation({ runSeed: 1, iteration: 0, sigma: 0.05, rank: 1, members: ask({ population: 2, antithetic: true }) });
    const options = { member: { kind: 'member' as const, iteration: 0, index: 1 }, sampling: { temperature: 1, topP: 1, topK: 0 }, maxNewTokens: 12 };
    const messages = [{ role: 'user' as const, content: 'play' }];
    const a = await new ModelPolicy(engine, { ...options, episode: 7 }).act(messages, { step: 0 });
    const again = await new ModelPolicy(engine, { ...options, episode: 7 }).act(messages, { step: 0 });
    const otherEpisode = await new ModelPolicy(engine, { ...options, episode: 8 }).act(messages, { step: 0 });
    expect(again.text).toBe(a.text);
    expect(otherEpisode.text).not.toBe(a.text);
    expect(a.tokens.prompt).toBe(engine.encodeChat(messages).length);
    expect(a.tokens.completion).toBeGreaterThan(0);
    expect(a.inferenceMs).toBeGreaterThan(0);
    await engine.close();
  });

  it('refuses a chat with screenshots, saying what to use instead (its decoder reads text only)', async () => {
    let asked = 0;
    const engine = { generate: async () => (asked++, []) } as unknown as ConstructorParameters<typeof ModelPolicy>[0];
    const policy = new ModelPolicy(engine, { member: { kind: 'base' }, episode: 0, sampling: { temperature: 1, topP: 1, topK: 0 }, maxNewTokens: 4 });
    await expect(policy.act([{ role: 'user', content: 'the page', images: ['data:image/png;base64,AA=='] }], { step: 0 })).rejects.toThrow(/screenshots, which esopt's own models cannot see: use observation "text" or "axtree"/);
    expect(asked).toBe(0);
  });

  it('sampling seeds differ across member, episode and turn', () => {
    const m = { kind: 'member' as const, iteration: 3, index: 4 };
    const seeds = new Set([samplingSeed(m, 0, 0), samplingSeed(m, 0, 1), samplingSeed(m, 1, 0), samplingSeed({ ...m, index: 5 }, 0, 0), samplingSeed({ kind: 'base' }, 0, 0)]);
    expect(seeds.size).toBe(5);
    expect(samplingSeed(m, 0, 1)).toBe(samplingSeed(m, 0, 1));
  });
});
