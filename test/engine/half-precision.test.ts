/**
 * fp16 exports: θ is an fp32 master (perturbation, exact restore and the update in fp32) and sessions are
 * fed fp16, in full mode (θ as inputs and rebuild-session) and low-rank mode; bf16 exports load widened to
 * fp32 (the masters are the bf16 values, the graph computes in fp32 on them).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
import { applyDenseUpdate, ask, layoutSegments } from '../../shared/es.ts';
import { buildDecoder } from '../../trainer/engine/model/build-decoder.ts';
import { byteTokenizerConfig, byteTokenizerJson } from '../../trainer/engine/model/byte-tokenizer.ts';
import type { ModelConfig } from '../../trainer/engine/model/config.ts';
import { createOnnxEngine } from '../../trainer/engine/model/create-engine.ts';
import { halfPrecisionCost } from '../../trainer/engine/model/half-theta.ts';
import { loadModelDir, saveModelDir } from '../../trainer/engine/model/model-dir.ts';
import { referenceForward } from '../../trainer/engine/model/reference-forward.ts';
import { initDecoderWeights } from '../../trainer/engine/model/weights.ts';
import { bf16Bits, bf16Value, fp16Bits, fp16Value, fromHalf, toHalf } from '../../trainer/engine/onnx/half.ts';
import type { NamedTensor } from '../../trainer/engine/onnx/named-tensor.ts';
import { DataType, type ModelProto } from '../../trainer/engine/onnx/proto.ts';
import { toHalfExport } from './helpers/exporter-style.ts';
import { argmax, fullLogits, maxAbsDiff, session } from './onnx-helpers.ts';

const c: ModelConfig = {
  model_type: 'llama', vocab_size: 260, hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2, num_attention_heads: 4,
  num_key_value_heads: 2, max_position_embeddings: 64, rms_norm_eps: 1e-6, tie_word_embeddings: true, eos_token_id: 257, torch_dtype: 'float16',
};
/** Weights scaled up so the logits have margins fp16 keeps (the 0.02 init makes near-ties). */
const weights = initDecoderWeights(c, 11).map((w) => ({ ...w, data: w.dims.length === 2 ? w.data.map((v) => v * 4) : w.data }));
const fp16OnGrid = (v: number) => fp16Value(fp16Bits(v));
const bf16OnGrid = (v: number) => bf16Value(bf16Bits(v));
const onHalfGrid = (ws: readonly NamedTensor[], onGrid: (v: number) => number) => ws.map((w) => ({ ...w, data: w.data.map(onGrid) }));
const rounded = (ws: readonly NamedTensor[]) => onHalfGrid(ws, fp16OnGrid);
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/**
 * A bf16 export as PyTorch writes one around an fp32 island: the embedding's output cast to FLOAT and back
 * to BFLOAT16 (value-preserving), the intermediate declared in value_info.
 */
function withCastPair(m: ModelProto): ModelProto {
  const g = m.graph;
  const gather = g.node.findIndex((n) => n.opType === 'Gather' && n.input[0] === 'model.embed_tokens.weight');
  const x = g.node[gather].output[0];
  for (const n of g.node) n.input = n.input.map((i) => (i === x ? 'embed/bf16' : i));
  const cast = (from: string, to: string, type: number) => ({ name: `cast/${to}`, opType: 'Cast', domain: '', input: [from], output: [to], attribute: [{ name: 'to', type: 2, i: type }] });
  g.node.splice(gather + 1, 0, cast(x, 'embed/fp32', DataType.FLOAT), cast('embed/fp32', 'embed/bf16', DataType.BFLOAT16));
  g.valueInfo.push({ name: 'embed/bf16', type: { tensorType: { elemType: DataType.BFLOAT16 } } });
  return m;
}

function exported(kind: 'fp16' | 'bf16'): string {
  const dir = mkdtempSync(join(tmpdir(), `esopt-${kind}-`));
  dirs.push(dir);
  const copy = weights.map((w) => ({ ...w, data: Float32Array.from(w.data) }));
  const graph = toHalfExport(buildDecoder(c, copy), kind);
  saveModelDir(dir, { config: c, graph: kind === 'bf16' ? withCastPair(graph) : graph, tokenizerJson: byteTokenizerJson(), tokenizerConfig: byteTokenizerConfig() });
  return dir;
}

function referenceGreedy(ws: readonly NamedTensor[], prompt: number[], n: number): number[] {
  const ids = [...prompt];
  for (let i = 0; i < n; i++) ids.push(argmax(referenceForward(c, ws, ids, true)[0]));
  return ids.slice(prompt.length);
}

/** The last position's logits of an fp16 graph for one row (fp16 KV caches in, fp16 logits out). */
async function halfLogits(s: ort.InferenceSession, ids: number[]): Promise<Float32Array> {
  const n = ids.length;
  const feeds: Record<string, ort.Tensor> = {
    input_ids: new ort.Tensor('int64', BigInt64Array.from(ids, BigInt), [1, n]),
    attention_mask: new ort.Tensor('int64', new BigInt64Array(n).fill(1n), [1, n]),
    position_ids: new ort.Tensor('int64', BigInt64Array.from(ids, (_, i) => BigInt(i)), [1, n]),
  };
  for (let l = 0; l < c.num_hidden_layers; l++) for (const kv of ['key', 'value']) feeds[`past_key_values.${l}.${kv}`] = new ort.Tensor('float16', new Uint16Array(0), [1, 2, 0, 8]);
  const logits = (await s.run(feeds)).logits;
  expect(logits.type).toBe('float16');
  return Float32Array.from((logits.data as Uint16Array).subarray((n - 1) * c.vocab_size), fp16Value);
}

const prompt = [256, 72, 101, 108, 108, 111];
const row = { promptIds: prompt, member: { kind: 'base' as const }, sampling: { temperature: 0, topP: 1, topK: 0, seed: 0 }, maxNewTokens: 4, stop: [], ignoreEos: true };
const population = { runSeed: 3, iteration: 1, sigma: 0.05, rank: 2, members: ask({ population: 2, antithetic: true }) };
const bits = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

/**
 * One half-precision export through an engine: greedy decode equals the reference on the export's own values,
 * members decode differently, θ's fp32 master is restored bit for bit, one update lands (bitwise equal to
 * `applyDenseUpdate` in full mode) and stays off the half grid, and decoding after it equals the reference on
 * what the session computes with (`computedOn`: fp16 sessions round the master, widened bf16 ones do not).
 */
async function trainsOnMaster(
  kind: 'fp16' | 'bf16',
  options: { mode: 'full' | 'lowrank'; fullModeWeights?: 'inputs' | 'rebuild-session' },
  onGrid: (v: number) => number,
  computedOn: (ws: readonly NamedTensor[]) => readonly NamedTensor[],
): Promise<void> {
  const dir = exported(kind);
  const loaded = loadModelDir(dir);
  const engine = await createOnnxEngine(loaded, { model: { dir }, ...options });
  try {
    const master = loaded.weights.map((w) => Float32Array.from(w.data));
    const [base] = await engine.generate([row]);
    expect(base.tokenIds).toEqual(referenceGreedy(onHalfGrid(weights, onGrid), prompt, 4));
    engine.setPopulation(population);
    const members = await engine.generate(population.members.map((m) => ({ ...row, member: { kind: 'member' as const, iteration: 1, index: m.index } })));
    expect(members.map((m) => m.tokenIds)).not.toEqual([base.tokenIds, base.tokenIds]);
    engine.segments().forEach((s, i) => expect(bits(s.data).equals(bits(master[i])), s.name).toBe(true));

    const update = { runSeed: 3, iteration: 1, rank: 2, coefficients: [{ noiseIndex: 0, coef: 0.5 }] };
    await engine.applyUpdate(update);
    const updated = await engine.withRestoredWeights((segs) => segs.map((s, i) => ({ ...loaded.weights[i], data: Float32Array.from(s.data) })));
    if (options.mode === 'full') {
      const expected = master.map((m, i) => ({ ...loaded.weights[i], data: Float32Array.from(m) }));
      applyDenseUpdate(layoutSegments(expected), 3, 1, update.coefficients, { decay: 0 });
      updated.forEach((w, i) => expect(bits(w.data).equals(bits(expected[i].data)), w.name).toBe(true));
    }
    // the master moved by less than the half type's resolution in places: the update is kept in fp32, not rounded away
    expect(updated.some((w) => w.data.some((v) => onGrid(v) !== v))).toBe(true);
    const [after] = await engine.generate([row]);
    expect(after.tokenIds).toEqual(referenceGreedy(computedOn(updated), prompt, 4));
  } finally {
    await engine.close();
  }
}


describe('fp16 exports', () => {
  it('load with fp32 masters equal to the fp16 values, and the graph computes like fp32 within fp16 tolerance', async () => {
    const dir = exported('fp16');
    const loaded = loadModelDir(dir);
    expect(loaded.half?.size).toBe(weights.length);
    // what `bench memory` reports: the fp32 masters on top of the fp16 bytes
    const n = weights.reduce((a, w) => a + w.data.length, 0);
    expect(halfPrecisionCost(dir)).toEqual({ fp16Elements: n, masterMiB: (4 * n) / 2 ** 20, fp16MiB: (2 * n) / 2 ** 20 });
    const expected = rounded(weights);
    loaded.weights.forEach((w, i) => expect(bits(w.data).equals(bits(expected[i].data)), w.name).toBe(true));
    const [fp32] = await fullLogits(await session(buildDecoder(c, expected)), c, [prompt]);
    const fp16 = await halfLogits(await session(toHalfExport(buildDecoder(c, rounded(weights)), 'fp16')), prompt);
    expect(maxAbsDiff(fp16, fp32[5])).toBeLessThan(0.05);
    expect(maxAbsDiff(fp16, fp32[4])).toBeGreaterThan(0.1);
  });

  for (const [mode, fullModeWeights] of [['full', 'inputs'], ['full', 'rebuild-session'], ['lowrank', undefined]] as const) {
    it(`${mode}${fullModeWeights ? ` (${fullModeWeights})` : ''}: decodes like the reference, restores the master exactly, and applies one update`, { timeout: 60_000 }, () =>
      trainsOnMaster('fp16', { mode, ...(fullModeWeights ? { fullModeWeights } : {}) }, fp16OnGrid, rounded));
  }
});

const bf16Rounded = (ws: readonly NamedTensor[]) => onHalfGrid(ws, bf16OnGrid);

describe('bf16 exports', () => {
  it('load widened to fp32: masters equal the bf16 values, one θ entry a parameter, no BFLOAT16 left in the graph', () => {
    const loaded = loadModelDir(exported('bf16'));
    expect(loaded.half).toBeUndefined();
    expect(loaded.weights.map((w) => w.name)).toEqual(weights.map((w) => w.name));
    expect(loaded.weights.reduce((a, w) => a + w.data.length, 0)).toBe(weights.reduce((a, w) => a + w.data.length, 0));
    const expected = bf16Rounded(weights);
    // bf16 keeps fewer bits than fp32: the rounding is visible, and the masters hold exactly the bf16 values
    expect(expected.some((w, i) => w.data.some((v, j) => v !== weights[i].data[j]))).toBe(true);
    loaded.weights.forEach((w, i) => expect(bits(w.data).equals(bits(expected[i].data)), w.name).toBe(true));
    const g = loaded.graph.graph;
    expect(g.initializer.filter((t) => t.dataType === DataType.BFLOAT16)).toEqual([]);
    expect([...g.input, ...g.output, ...g.valueInfo].filter((v) => v.type?.tensorType?.elemType !== DataType.FLOAT && v.type?.tensorType?.elemType !== DataType.INT64)).toEqual([]);
    expect(g.node.filter((n) => n.opType === 'Cast' && n.name?.startsWith('cast/embed')).map((n) => n.attribute[0].i)).toEqual([DataType.FLOAT, DataType.FLOAT]);
  });

  for (const mode of ['full', 'lowrank'] as const) {
    it(`${mode}: decodes like the reference on the bf16 values, restores θ exactly, and applies one update`, { timeout: 60_000 }, () =>
      trainsOnMaster('bf16', { mode }, bf16OnGrid, (ws) => ws));
  }
});

describe('half-precision conversions', () => {
  it('every fp16 and bf16 value round-trips, and the bulk fp16 cast equals the scalar rule (round to nearest even)', () => {
    const all = Uint16Array.from({ length: 65536 }, (_, h) => h);
    const asFloat = new Float32Array(65536);
    for (const kind of ['fp16', 'bf16'] as const) {
      fromHalf(all, asFloat, kind);
      const back = new Uint16Array(65536);
      toHalf(asFloat, back, kind);
      const value = kind === 'fp16' ? fp16Value : bf16Value;
      const wrong = all.filter((h) => (Number.isNaN(value(h)) ? !Number.isNaN(asFloat[h]) : back[h] !== h));
      expect(wrong.length, kind).toBe(0);
    }
    // random words and the edges of each path: ties to even, overflow to infinity, subnormals, underflow
    const src = new Float32Array(200_000);
    const words = new Uint32Array(src.buffer);
    for (let i = 0; i < words.length; i++) words[i] = Math.imul(i + 1, 0x9e3779b1) >>> 0;
    [65504, 65519.99, 65520, 2 ** -14, 2 ** -24, 2 ** -25, 3 * 2 ** -26, 1 + 2 ** -11, 1 + 3 * 2 ** -11, 2049, -0].forEach((v, i) => (src[i] = v));
    const bulk = new Uint16Array(src.length);
    toHalf(src, bulk, 'fp16');
    expect(src.filter((v, i) => !Number.isNaN(v) && bulk[i] !== fp16Bits(v)).length).toBe(0);
    expect([fp16Bits(65520), fp16Bits(1 + 2 ** -11), fp16Bits(1 + 3 * 2 ** -11), fp16Bits(2 ** -25), fp16Bits(3 * 2 ** -26)]).toEqual([0x7c00, 0x3c00, 0x3c02, 0x0000, 0x0001]);
    expect([bf16Bits(1 + 2 ** -8), bf16Bits(1 + 3 * 2 ** -8)]).toEqual([0x3f80, 0x3f82]);
  });
});
