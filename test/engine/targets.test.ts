/**
 * Targets in the model runtime, on real onnxruntime engines (the tiny preset, the PyTorch-exported tied
 * fixture, an fp16 export): which tensors each mode offers and `all-linear` takes; a full-mode member
 * perturbs only the targeted tensors, each with exactly the noise it gets under `all`, and θ comes back
 * bit for bit (one thread and with a lent worker); low-rank factors are drawn only for targeted matrices;
 * and an update changes the targeted tensors exactly as an `all` update changes them while every other
 * tensor keeps its hash — in full mode, low-rank mode, with a tied embedding and on fp16 masters.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ask, layoutSegments, type ParameterSegment } from '../../shared/es.ts';
import { Targets, type TargetsInput } from '../../shared/targets.ts';
import { hashTheta } from '../../shared/theta-hash.ts';
import type { Engine, EngineUpdate } from '../../trainer/engine/engine.ts';
import { buildDecoder } from '../../trainer/engine/model/build-decoder.ts';
import { byteTokenizerConfig, byteTokenizerJson } from '../../trainer/engine/model/byte-tokenizer.ts';
import type { ModelConfig } from '../../trainer/engine/model/config.ts';
import { createEngine } from '../../trainer/engine/model/create-engine.ts';
import { saveModelDir } from '../../trainer/engine/model/model-dir.ts';
import { openModel } from '../../trainer/engine/model/open-model.ts';
import { forEachMember, type FullModeTheta } from '../../trainer/engine/members/full-mode-switch.ts';
import { TargetTensors } from '../../trainer/engine/model/target-tensors.ts';
import { initDecoderWeights } from '../../trainer/engine/model/weights.ts';
import { FactorCache } from '../../trainer/engine/perturbation/lowrank-factors.ts';
import { lowRankRewrite } from '../../trainer/engine/perturbation/lowrank-graph.ts';
import { PerturbationPool } from '../../trainer/engine/perturbation/perturbation-pool.ts';
import { toHalfExport } from './helpers/exporter-style.ts';

const TIED = fileURLToPath(new URL('../fixtures/torch-llama-tied', import.meta.url));
const tiny = { preset: 'tiny' as const, seed: 4 };
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

const bits = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
const copies = (segs: readonly ParameterSegment[]) => segs.map((s) => Float32Array.from(s.data));
const targets = (t: TargetsInput) => Targets.parse(t);
const population = (t?: TargetsInput) => ({ runSeed: 7, iteration: 2, sigma: 0.05, rank: 2, members: ask({ population: 4, antithetic: true }), ...(t ? { targets: targets(t) } : {}) });
const update = (t?: TargetsInput): EngineUpdate => ({ runSeed: 7, iteration: 2, rank: 2, decay: 0.01, coefficients: [{ noiseIndex: 0, coef: 0.3 }, { noiseIndex: 1, coef: -0.2 }], ...(t ? { targets: targets(t) } : {}) });

/**
 * Two engines of one model, one updated with `t` and one with `all`: the targeted tensors are bitwise those
 * of the `all` engine, the rest bitwise θ_0, and the `all` update did move the rest (so the check can fail).
 */
async function updatesOnlyTargets(open: () => Promise<Engine>, t: TargetsInput): Promise<string[]> {
  const [picked, everything] = [await open(), await open()];
  try {
    const before = copies(picked.segments());
    const chosen = new Set(picked.targetTensors(targets(t)));
    await picked.applyUpdate(update(t));
    await everything.applyUpdate(update());
    const after = picked.segments();
    const all = everything.segments();
    const untargetedMoved = after.filter((s, i) => !chosen.has(s.name) && !bits(all[i].data).equals(bits(before[i])));
    after.forEach((s, i) => {
      if (chosen.has(s.name)) {
        expect(bits(s.data).equals(bits(all[i].data)), s.name).toBe(true);
        expect(bits(s.data).equals(bits(before[i])), s.name).toBe(false);
      } else expect(hashTheta([s]), s.name).toBe(hashTheta([{ data: before[i] }]));
    });
    expect(untargetedMoved.length).toBeGreaterThan(0);
    return [...chosen];
  } finally {
    await picked.close();
    await everything.close();
  }
}

describe('what each mode offers', () => {
  it('all-linear is the projection matrices: no embedding, LM head or norm; low-rank offers only matrices', async () => {
    const full = await createEngine({ model: tiny, mode: 'full' });
    const lowrank = await createEngine({ model: tiny, mode: 'lowrank' });
    try {
      const projections = full.segments().map((s) => s.name).filter((n) => /_proj\.weight$/.test(n));
      expect(projections).toHaveLength(14);
      expect(full.targetTensors(targets('all-linear'))).toEqual(projections);
      expect(lowrank.targetTensors(targets('all-linear'))).toEqual(projections);
      expect(full.targetTensors(targets('all'))).toHaveLength(full.segments().length);
      expect(lowrank.targetTensors(targets('all'))).toEqual([...projections, 'lm_head.weight']);
      expect(full.targetTensors(targets({ include: 'all', exclude: ['layernorm|norm\\.weight$', 'embed_tokens'] }))).toEqual([...projections, 'lm_head.weight']);
      expect(() => lowrank.targetTensors(targets({ include: ['input_layernorm'] }))).toThrow(/targets\.include\[0\]: "input_layernorm" matches none of low-rank mode's matrices: model\.layers\.0\.self_attn\.q_proj\.weight/);
    } finally {
      await full.close();
      await lowrank.close();
    }
  });

  it('an export whose weights are onnx::MatMul_… is targeted by module names; its tied head goes with the embedding', async () => {
    const engine = await createEngine({ model: { dir: TIED }, mode: 'full' });
    try {
      const qv = engine.targetTensors(targets({ include: ['q_proj,v_proj'] }));
      expect(qv).toHaveLength(4);
      expect(qv.every((n) => n.startsWith('onnx::MatMul_'))).toBe(true);
      const linear = engine.targetTensors(targets('all-linear'));
      expect(linear).toHaveLength(14);
      expect(linear).not.toContain('model.embed_tokens.weight');
      expect(engine.targetTensors(targets({ include: ['embed_tokens'] }))).toEqual(['model.embed_tokens.weight']);
      expect(() => engine.targetTensors(targets({ include: ['lm_head'] }))).toThrow(/the LM head is tied to "model\.embed_tokens\.weight" and is one tensor with it/);
    } finally {
      await engine.close();
    }
  });
});

describe('members perturb only the targeted tensors', () => {
  it.each([1, 2])('full mode on %i thread(s): each targeted tensor as under all, the rest untouched, θ restored', async (threads) => {
    const model = openModel(tiny);
    const switcher = await PerturbationPool.create(threads - 1);
    const theta: FullModeTheta = { model, segments: layoutSegments(model.weights), switcher, targets: new TargetTensors(model, model.weights.map((_, i) => i), "full mode's tensors") };
    try {
      const before = copies(theta.segments);
      const seen = async (t?: TargetsInput) => {
        const p = population(t);
        let during: Float32Array[] = [];
        await forEachMember(theta, [p.members[1]], p, async () => void (during = copies(theta.segments)));
        theta.segments.forEach((s, i) => expect(bits(s.data).equals(bits(before[i])), `${s.name} restored`).toBe(true));
        return during;
      };
      const all = await seen();
      const t = { include: ['q_proj,v_proj'], exclude: ['layers\\.1\\.'] };
      const picked = await seen(t);
      const chosen = new Set(theta.targets.names(targets(t)));
      expect([...chosen]).toEqual(['model.layers.0.self_attn.q_proj.weight', 'model.layers.0.self_attn.v_proj.weight']);
      theta.segments.forEach((s, i) => {
        if (chosen.has(s.name)) {
          expect(bits(picked[i]).equals(bits(all[i])), s.name).toBe(true);
          expect(bits(picked[i]).equals(bits(before[i])), s.name).toBe(false);
        } else {
          expect(bits(picked[i]).equals(bits(before[i])), s.name).toBe(true);
          expect(bits(all[i]).equals(bits(before[i])), s.name).toBe(false);
        }
      });
    } finally {
      await switcher.close();
    }
  });

  it('low-rank mode draws factors for the targeted matrices only, the same ones as under all', () => {
    const model = openModel(tiny);
    const { targets: matrices, groups } = lowRankRewrite(model.graph, model.weights);
    const chosen = new TargetTensors(model, matrices.map((m) => m.weight), "low-rank mode's matrices");
    const t = targets({ include: ['k_proj', 'down_proj'] });
    const p = population();
    const members = [p.members[0], null, p.members[3]];
    const all = new FactorCache(matrices, groups, p).feeds(members);
    const picked = new FactorCache(matrices, groups, p, chosen.select(t)).feeds(members);
    const named = new Set(chosen.names(t));
    let compared = 0;
    groups.forEach((g) => {
      const r = p.rank;
      const k = g.targets.length;
      const width = g.targets.reduce((s, ti) => s + matrices[ti].n, 0);
      const [aAll, aPicked] = [all[g.a].data as Float32Array, picked[g.a].data as Float32Array];
      const [bAll, bPicked] = [all[g.b].data as Float32Array, picked[g.b].data as Float32Array];
      for (let row = 0; row < members.length; row++) {
        let col = 0;
        g.targets.forEach((ti, block) => {
          const on = named.has(matrices[ti].name);
          for (let i = 0; i < g.m; i++) {
            for (let q = 0; q < r; q++) {
              const at = row * g.m * k * r + i * k * r + block * r + q;
              expect(aPicked[at]).toBe(on ? aAll[at] : 0);
            }
          }
          for (let q = 0; q < r; q++) {
            for (let j = 0; j < matrices[ti].n; j++) {
              const at = row * k * r * width + (block * r + q) * width + col + j;
              expect(bPicked[at]).toBe(on ? bAll[at] : 0);
            }
          }
          if (on && members[row]) compared++;
          col += matrices[ti].n;
        });
      }
    });
    expect(compared).toBe(2 * 2 * 2); // k_proj and down_proj in each of 2 layers, for the 2 member rows
    expect(named.size).toBe(4);
  });
});

describe('the update touches only the targeted tensors', () => {
  it('full mode', async () => {
    const chosen = await updatesOnlyTargets(() => createEngine({ model: tiny, mode: 'full' }), { include: 'all-linear', exclude: ['mlp'] });
    expect(chosen).toHaveLength(8);
  });

  it('full mode with rebuilt sessions', async () => {
    await updatesOnlyTargets(() => createEngine({ model: tiny, mode: 'full', fullModeWeights: 'rebuild-session' }), { include: ['^model\\.layers\\.1\\.'] });
  });

  it('low-rank mode', async () => {
    const chosen = await updatesOnlyTargets(() => createEngine({ model: tiny, mode: 'lowrank' }), { include: ['mlp'] });
    expect(chosen).toHaveLength(6);
  });

  it('a tied embedding, in both modes: targeted with its head as one tensor, or left out with it', async () => {
    for (const mode of ['full', 'lowrank'] as const) {
      expect(await updatesOnlyTargets(() => createEngine({ model: { dir: TIED }, mode }), { include: ['embed_tokens'] })).toEqual(['model.embed_tokens.weight']);
      expect(await updatesOnlyTargets(() => createEngine({ model: { dir: TIED }, mode }), 'all-linear')).not.toContain('model.embed_tokens.weight');
    }
  });

  it('fp16 masters: the update stays on the targeted masters, and members decode', async () => {
    const c: ModelConfig = {
      model_type: 'llama', vocab_size: 260, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2, num_attention_heads: 4,
      num_key_value_heads: 2, max_position_embeddings: 64, rms_norm_eps: 1e-6, tie_word_embeddings: true, eos_token_id: 257, torch_dtype: 'float16',
    };
    const dir = mkdtempSync(join(tmpdir(), 'esopt-targets-fp16-'));
    dirs.push(dir);
    saveModelDir(dir, { config: c, graph: toHalfExport(buildDecoder(c, initDecoderWeights(c, 11)), 'fp16'), tokenizerJson: byteTokenizerJson(), tokenizerConfig: byteTokenizerConfig() });
    const t = { include: ['o_proj', 'down_proj'] };
    await updatesOnlyTargets(() => createEngine({ model: { dir }, mode: 'full' }), t);
    const engine = await createEngine({ model: { dir }, mode: 'full' });
    try {
      const before = hashTheta(engine.segments());
      const p = population(t);
      engine.setPopulation(p);
      const row = { promptIds: [256, 72, 105], sampling: { temperature: 0, topP: 1, topK: 0, seed: 0 }, maxNewTokens: 3, stop: [], ignoreEos: true };
      const out = await engine.generate(p.members.map((m) => ({ ...row, member: { kind: 'member' as const, iteration: p.iteration, index: m.index } })));
      expect(out.map((o) => o.tokenIds.length)).toEqual([3, 3, 3, 3]);
      expect(hashTheta(engine.segments())).toBe(before);
    } finally {
      await engine.close();
    }
  });
});
