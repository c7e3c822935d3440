import { describe, expect, it } from 'vitest';
import { ask, type Coefficient } from '../../shared/es.ts';
import { accumulateLowRank, applyLowRank, lowRankFactors } from '../../shared/lowrank.ts';
import { buildDecoder } from '../../trainer/engine/model/build-decoder.ts';
import { createOnnxEngine } from '../../trainer/engine/model/create-engine.ts';
import { buildPreset } from '../../trainer/engine/model/open-model.ts';
import { PRESETS } from '../../trainer/engine/model/presets.ts';
import { initDecoderWeights } from '../../trainer/engine/model/weights.ts';
import { FactorCache, lowRankOffsets } from '../../trainer/engine/perturbation/lowrank-factors.ts';
import { lowRankRewrite } from '../../trainer/engine/perturbation/lowrank-graph.ts';
import { fullLogits, maxAbsDiff, session } from './onnx-helpers.ts';

const c = PRESETS.tiny;
const population = { runSeed: 21, iteration: 4, sigma: 0.05, rank: 2, members: ask({ population: 4, antithetic: true }) };

describe('low-rank graph rewrite', () => {
  it("a member row's logits equal the model with W + sign·σ·A Bᵀ/√r materialised densely", async () => {
    const weights = initDecoderWeights(c, 5);
    const { model, targets, groups } = lowRankRewrite(buildDecoder(c, weights), weights);
    expect(targets.length).toBe(c.num_hidden_layers * 7 + 1); // q k v o gate up down per layer, lm_head
    expect(groups.length).toBe(c.num_hidden_layers * 4 + 1); // by shared input: qkv, o, gate+up, down; lm_head
    const rewritten = await session(model);
    const prompt = [256, 40, 41, 42, 43, 44];
    const rowMembers = [null, population.members[1], population.members[2], population.members[3]];
    const logits = await fullLogits(rewritten, c, rowMembers.map(() => prompt), new FactorCache(targets, groups, population).feeds(rowMembers));

    const offsets = lowRankOffsets(targets, population.rank);
    for (const [b, member] of rowMembers.entries()) {
      const dense = initDecoderWeights(c, 5);
      if (member) {
        targets.forEach((t, j) => {
          const f = lowRankFactors({ runSeed: 21, iteration: 4, member: member.noiseIndex }, t.m, t.n, 2, offsets[j]);
          applyLowRank(dense[t.weight].data, t.m, t.n, 2, f, member.sign * population.sigma);
        });
      }
      const [expected] = await fullLogits(await session(buildDecoder(c, dense)), c, [prompt]);
      for (let j = 0; j < prompt.length; j++) expect(maxAbsDiff(logits[b][j], expected[j])).toBeLessThan(2e-5);
    }
    // the perturbation is visible: antithetic members 2 and 3 differ from the base and from each other
    expect(maxAbsDiff(logits[2][5], logits[0][5])).toBeGreaterThan(1e-3);
    expect(maxAbsDiff(logits[2][5], logits[3][5])).toBeGreaterThan(1e-3);
  });

  it('the update folds Σ coef·A Bᵀ/√r into W and the refreshed session serves it', async () => {
    const loaded = buildPreset('tiny', 6);
    const engine = await createOnnxEngine(loaded, { model: { preset: 'tiny', seed: 6 }, mode: 'lowrank' });
    const prompt = { promptIds: [256, 1, 2, 3], member: { kind: 'base' as const }, sampling: { temperature: 0, topP: 1, topK: 0, seed: 0 }, maxNewTokens: 16, stop: [] };
    const [before] = await engine.generate([prompt]);
    const coefficients: Coefficient[] = [{ noiseIndex: 0, coef: 0.4 }, { noiseIndex: 1, coef: -0.3 }];
    const expected = initDecoderWeights(c, 6);
    const { targets } = lowRankRewrite(buildDecoder(c, expected), expected);
    const offsets = lowRankOffsets(targets, 2);
    targets.forEach((t, j) => accumulateLowRank(expected[t.weight].data, t.m, t.n, 2, coefficients.map((k) => ({ key: { runSeed: 21, iteration: 4, member: k.noiseIndex }, offset: offsets[j], coef: k.coef }))));

    await engine.applyUpdate({ runSeed: 21, iteration: 4, coefficients, rank: 2 });
    engine.segments().forEach((s, i) => expect(maxAbsDiff(s.data, expected[i].data)).toBe(0));
    const [after] = await engine.generate([prompt]);
    const [fresh] = await (await createOnnxEngine({ ...buildPreset('tiny', 6), weights: expected, graph: buildDecoder(c, expected) }, { model: { preset: 'tiny', seed: 6 }, mode: 'lowrank' })).generate([prompt]);
    expect(after.tokenIds).toEqual(fresh.tokenIds);
    expect(after.tokenIds).not.toEqual(before.tokenIds);
    await engine.close();
  });
});
