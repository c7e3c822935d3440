/**
 * The in-place KV rewrite (trainer/engine/model/fused-attention.ts) on graphs PyTorch's own exporter wrote
 * (torch.onnx.export, TorchScript, torch 1.13): a Llama (scripts/export-torch-llama.py, opset 14, folded and
 * unfolded), a Qwen3 with q/k RMSNorm and head_dim apart from hidden/heads, and a Qwen2 with q/k/v biases
 * (scripts/export-torch-qwen.py, opset 17, transformers' eager attention: Mul by the scale, a float32 Softmax
 * cast back, a mask made with Trilu and a masked fill), and that Qwen3 with its attention written as torch ≥ 2.0
 * exports scaled_dot_product_attention (√scale from Shape(q) on q and on kᵀ; torch 1.13 has no SDPA, so the
 * script writes the decomposition out), and a Gemma (one K/V head, RMSNorm by 1 + w, embeddings × √hidden, a
 * gelu MLP, a tied head). Each is recognised by structure and fuses; engines over
 * the fused graph decode greedy tokens identical to engines over the unrewritten graph in full mode (θ as
 * inputs and rebuild-session), low-rank mode and LoRA mode, base and members in one batch, rows of different
 * prompt lengths (left-padded for the unrewritten graph, right-padded with seqlens_k for the fused one), and over
 * conversation turns served from the prefix cache; the base rows equal torch's own greedy tokens (greedy.json).
 * Graphs that differ where it matters (a softcap before the Softmax, a mask read from the hidden state, keys
 * scaled by a value of the hidden state, a past length read from a cache's shape outside the mask) are refused with the reason, and the engine decodes them
 * unfused, with the ESOPT_UNFUSED_ATTENTION warning.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ask } from '../../shared/es.ts';
import { LoraOptions } from '../../shared/lora.ts';
import type { EngineOptions, GenerateRow, MemberSelector, Population } from '../../trainer/engine/engine.ts';
import { headDim } from '../../trainer/engine/model/config.ts';
import { createOnnxEngine } from '../../trainer/engine/model/create-engine.ts';
import { fuseAttention } from '../../trainer/engine/model/fused-attention.ts';
import { loadModelDir, type LoadedModel } from '../../trainer/engine/model/model-dir.ts';
import type { OnnxEngine } from '../../trainer/engine/model/onnx-engine.ts';
import type { NodeProto } from '../../trainer/engine/onnx/proto.ts';

type Torch = { new_tokens: number; runs: Array<{ prompt: number[]; greedy: number[] }> };
const FIXTURES = ['torch-llama-tied', 'torch-llama-tied-unfolded', 'torch-qwen3', 'torch-qwen2', 'torch-qwen3-sdpa', 'torch-gemma'];
const dirOf = (fixture: string) => join(import.meta.dirname, '..', 'fixtures', fixture);
const torchOf = (fixture: string) => JSON.parse(readFileSync(join(dirOf(fixture), 'greedy.json'), 'utf8')) as Torch;

const greedy = { temperature: 0, topP: 1, topK: 0, seed: 0 };
const population: Population = { runSeed: 17, iteration: 1, sigma: 0.5, rank: 2, members: ask({ population: 4, antithetic: true }) };
const member = (index: number): MemberSelector => ({ kind: 'member', iteration: 1, index });
const everyone: MemberSelector[] = [{ kind: 'base' }, member(0), member(1), member(2), member(3), { kind: 'base' }];
const lora = { ...LoraOptions.parse({ rank: 2, alpha: 4, targets: 'all-linear' }), seed: 3 };

const engines: OnnxEngine[] = [];
afterAll(() => Promise.all(engines.map((e) => e.close())));

async function engineOf(fixture: string, options: Partial<EngineOptions>): Promise<OnnxEngine> {
  const engine = await createOnnxEngine(loadModelDir(dirOf(fixture)), { model: { dir: dirOf(fixture) }, mode: 'full', ...options });
  engines.push(engine);
  engine.setPopulation(population);
  return engine;
}

/** Prompts of 1 to 23 tokens and budgets 4 to 12, so rows pad differently and finish apart. */
function rows(who: MemberSelector[]): Array<GenerateRow & { promptIds: number[] }> {
  return who.map((m, i) => ({
    promptIds: [257, ...Array.from({ length: (i * 7) % 23 }, (_, j) => (i * 31 + j * 17) % 250)],
    member: m,
    sampling: greedy,
    maxNewTokens: 4 + ((i * 5) % 9),
    stop: [],
    ignoreEos: true,
  }));
}

describe.each(FIXTURES)('%s: the exporter’s attention is recognised', (fixture) => {
  it('every layer becomes GroupQueryAttention with the export’s scale; no Softmax, mask or past length is left', () => {
    const model = loadModelDir(dirOf(fixture));
    const fused = fuseAttention(model.graph, model.config);
    if (!fused.fused) throw new Error(fused.reason);
    const nodes = fused.model.graph.node;
    const gqa = nodes.filter((n) => n.opType === 'GroupQueryAttention');
    expect(gqa.length).toBe(model.config.num_hidden_layers);
    const attr = (n: NodeProto, name: string) => n.attribute.find((a) => a.name === name);
    for (const n of gqa) {
      expect([attr(n, 'num_heads')?.i, attr(n, 'kv_num_heads')?.i]).toEqual([model.config.num_attention_heads, model.config.num_key_value_heads]);
      // the exporters scale the scores (Div by √hd in the Llama script, Mul by hd^−½ in transformers' code); SDPA's
      // decomposition multiplies q and kᵀ by √scale each, computed from Shape(q): q keeps its own, the kernel takes kᵀ's
      const hd = headDim(model.config);
      expect(attr(n, 'scale')?.f).toBeCloseTo(fixture.endsWith('-sdpa') ? hd ** -0.25 : 1 / Math.sqrt(hd), 6);
    }
    // the Softmaxes, the mask (Trilu in transformers' code) and repeat_kv's Expands go; the rotary's Expand may stay
    expect(nodes.some((n) => n.opType === 'Softmax' || n.opType === 'Trilu' || (n.opType === 'Expand' && /layers/.test(n.name ?? '')))).toBe(false);
    expect(fused.model.graph.input.map((i) => i.name)).not.toContain('attention_mask');
    expect(nodes.filter((n) => n.input.some((x) => x.startsWith('past_key_values.'))).every((n) => n.opType === 'GroupQueryAttention')).toBe(true);
  });
});

describe.each(FIXTURES)('%s: greedy tokens with and without the rewrite', (fixture) => {
  it.each([
    ['full mode, θ as inputs', { mode: 'full', fullModeWeights: 'inputs' }],
    ['full mode, rebuild-session', { mode: 'full', fullModeWeights: 'rebuild-session' }],
    ['low-rank mode', { mode: 'lowrank' }],
    ['LoRA mode', { mode: 'lora', lora }],
  ] as Array<[string, Partial<EngineOptions>]>)('%s: base and members batched, left- against right-padded', { timeout: 60_000 }, async (_, options) => {
    const fused = await engineOf(fixture, { ...options, inPlaceKv: true });
    const plain = await engineOf(fixture, { ...options, inPlaceKv: false });
    expect(fused.kvCache).toEqual({ inPlace: true });
    expect(plain.kvCache.inPlace).toBe(false);
    const [a, b] = [await fused.generate(rows(everyone)), await plain.generate(rows(everyone))];
    expect(a.map((r) => r.tokenIds)).toEqual(b.map((r) => r.tokenIds));
    expect(a.map((r) => r.completionTokens)).toEqual(rows(everyone).map((r) => r.maxNewTokens));
    // on one prompt the members decode apart from the base, so the comparison reaches the perturbation
    const one = await fused.generate(everyone.slice(0, 5).map((m) => ({ ...rows([m])[0], promptIds: [257, 72, 105], maxNewTokens: 8 })));
    expect(new Set(one.map((r) => r.tokenIds.join())).size).toBeGreaterThan(1);
  });

  it('the fused base rows decode as torch did with its own cache (greedy.json), in one left-padded batch', { timeout: 60_000 }, async () => {
    const torch = torchOf(fixture);
    const fused = await engineOf(fixture, { mode: 'lowrank', inPlaceKv: true });
    expect(fused.kvCache).toEqual({ inPlace: true });
    const out = await fused.generate(torch.runs.map((r) => ({ promptIds: r.prompt, member: { kind: 'base' }, sampling: greedy, maxNewTokens: torch.new_tokens, stop: [], ignoreEos: true })));
    expect(out.map((r) => r.tokenIds)).toEqual(torch.runs.map((r) => r.greedy));
  });

  it('multi-turn conversations from the prefix cache decode the same', { timeout: 60_000 }, async () => {
    const fused = await engineOf(fixture, { mode: 'lowrank', inPlaceKv: true });
    const plain = await engineOf(fixture, { mode: 'lowrank', inPlaceKv: false, prefixCacheBytes: 0 });
    const who: MemberSelector[] = [{ kind: 'base' }, member(1), member(2)];
    let prompts = rows(who).map((r) => r.promptIds);
    for (let turn = 0; turn < 3; turn++) {
      const go = (e: OnnxEngine) => e.generate(prompts.map((p, i) => ({ ...rows(who)[i], promptIds: p, maxNewTokens: 3 + i * 2 })));
      const [a, b] = [await go(fused), await go(plain)];
      expect(a.map((r) => r.tokenIds)).toEqual(b.map((r) => r.tokenIds));
      if (turn > 0) expect(a.every((r) => r.cachedTokens > 0)).toBe(true);
      prompts = prompts.map((p, i) => [...p, ...a[i].tokenIds, 10, 65 + turn + i, 10]);
    }
  });
});

/** The Qwen3 export with one edit to layer 1's graph. */
function planted(edit: (model: LoadedModel) => void): LoadedModel {
  const model = loadModelDir(dirOf('torch-qwen3'));
  edit(model);
  return model;
}
const nodeOf = (model: LoadedModel, test: (n: NodeProto) => boolean) => model.graph.graph.node.find(test)!;

describe('what does not match is refused with the reason, and decodes unfused with the warning', () => {
  it.each([
    [
      'a softcap (Tanh) between the scores and the Softmax',
      (m: LoadedModel) => {
        const softmax = nodeOf(m, (n) => n.opType === 'Softmax' && n.name!.includes('layers.1'));
        m.graph.graph.node.splice(m.graph.graph.node.indexOf(softmax), 0, { name: 'softcap', opType: 'Tanh', domain: '', input: [softmax.input[0]], output: ['softcapped'], attribute: [] });
        softmax.input[0] = 'softcapped';
      },
      /layer 1: Tanh node "softcap" between the scores and the context is not a scale, a mask or the Softmax/,
    ],
    [
      'a mask computed from the hidden state',
      (m: LoadedModel) => {
        const add = nodeOf(m, (n) => n.opType === 'Softmax' && n.name!.includes('layers.1'));
        const maskAdd = m.graph.graph.node.find((n) => n.output[0] === add.input[0])!;
        const hidden = nodeOf(m, (n) => n.name === '/layers.1/self_attn/q_proj/MatMul').input[0];
        m.graph.graph.node.splice(m.graph.graph.node.indexOf(maskAdd), 0, { name: 'hidden-mask', opType: 'ReduceMean', domain: '', input: [hidden], output: ['hidden-mask'], attribute: [] });
        maskAdd.input[1] = 'hidden-mask';
      },
      /layer 1: the mask added to the scores reads (input_ids|the float tensor)/,
    ],
    [
      'keys scaled by a value of the hidden state, not a constant',
      (m: LoadedModel) => {
        const g = m.graph.graph;
        const scores = nodeOf(m, (n) => n.opType === 'MatMul' && n.name === '/layers.1/self_attn/MatMul');
        const hidden = nodeOf(m, (n) => n.name === '/layers.1/self_attn/q_proj/MatMul').input[0];
        g.node.splice(g.node.indexOf(scores), 0,
          { name: 'hidden-scale', opType: 'ReduceMean', domain: '', input: [hidden], output: ['hidden-scale'], attribute: [{ name: 'keepdims', type: 2, i: 0 }] },
          { name: 'key-scale', opType: 'Mul', domain: '', input: [scores.input[1], 'hidden-scale'], output: ['scaled-keys'], attribute: [] },
        );
        scores.input[1] = 'scaled-keys';
      },
      /layer 1: Mul node "key-scale" scales the keys by something other than a positive scalar/,
    ],
    [
      'a past length read from a cache’s shape for the positions',
      (m: LoadedModel) => {
        // position_ids + (past length − past length): the same values, read from past_key_values.1.key's shape
        const g = m.graph.graph;
        const readers = g.node.filter((n) => n.input.includes('position_ids'));
        g.node.unshift(
          { name: 'past-shape', opType: 'Shape', domain: '', input: ['past_key_values.1.key'], output: ['past-shape'], attribute: [] },
          { name: 'past-zero', opType: 'Sub', domain: '', input: ['past-shape', 'past-shape'], output: ['past-zero'], attribute: [] },
          { name: 'past-zero-sum', opType: 'ReduceSum', domain: '', input: ['past-zero'], output: ['past-zero-sum'], attribute: [{ name: 'keepdims', type: 2, i: 0 }] },
          { name: 'positions', opType: 'Add', domain: '', input: ['position_ids', 'past-zero-sum'], output: ['positions'], attribute: [] },
        );
        for (const n of readers) n.input = n.input.map((x) => (x === 'position_ids' ? 'positions' : x));
      },
      /Shape node "past-shape" reads a past cache besides the attention/,
    ],
  ] as Array<[string, (m: LoadedModel) => void, RegExp]>)('%s', { timeout: 60_000 }, async (_, edit, reason) => {
    const model = planted(edit);
    const why = fuseAttention(model.graph, model.config);
    expect(why).toEqual({ fused: false, reason: expect.stringMatching(reason) });
    const warnings: string[] = [];
    const onWarning = (w: Error & { code?: string }) => warnings.push(`${w.code}: ${w.message}`);
    process.on('warning', onWarning);
    try {
      const engine = await createOnnxEngine(planted(edit), { model: { dir: dirOf('torch-qwen3') }, mode: 'lowrank' });
      engines.push(engine);
      expect(engine.kvCache).toEqual({ inPlace: false, reason: expect.stringMatching(reason) });
      const [r] = await engine.generate([{ promptIds: [257, 97, 98], member: { kind: 'base' }, sampling: greedy, maxNewTokens: 3, stop: [], ignoreEos: true }]);
      expect(r.completionTokens).toBe(3);
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.some((w) => w.startsWith('ESOPT_UNFUSED_ATTENTION: ') && /not grown in place/.test(w))).toBe(true);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('with fewer KV heads than query heads, a cache that is not repeated to them (the graph is not run)', () => {
    // the scores read layer 1's keys without repeat_kv: a query folded to the KV heads would be misread
    const model = loadModelDir(dirOf('torch-qwen3'));
    const kt = nodeOf(model, (n) => n.opType === 'Transpose' && n.name === '/layers.1/self_attn/Transpose_3');
    kt.input[0] = 'present.1.key';
    expect(fuseAttention(model.graph, model.config)).toEqual({ fused: false, reason: expect.stringMatching(/layer 1: the cache is not repeated to the 4 query heads \(2 KV heads\)/) });
  });
});
