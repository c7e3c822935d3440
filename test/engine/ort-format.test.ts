import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { buildDecoder } from '../../trainer/engine/model/build-decoder.ts';
import { createEngine } from '../../trainer/engine/model/create-engine.ts';
import { INLINE_SESSION_LIMIT, sessionOptionsFor } from '../../trainer/engine/model/sessions.ts';
import { GraphBuilder } from '../../trainer/engine/onnx/graph-builder.ts';
import { savePreset } from '../../trainer/engine/model/open-model.ts';
import { DataType } from '../../trainer/engine/onnx/proto.ts';
import { createOrtFormatSession, ortFormatModel } from '../../trainer/engine/model/ort-format.ts';
import { PRESETS } from '../../trainer/engine/model/presets.ts';
import { initDecoderWeights } from '../../trainer/engine/model/weights.ts';
import { fullLogits, maxAbsDiff, session } from './onnx-helpers.ts';

const options = sessionOptionsFor({});

/** y = x · Transpose(W): a weight behind an op an optimizer could fold into a constant. */
function transposedMatMul(w: Float32Array) {
  const g = new GraphBuilder();
  g.input('x', DataType.FLOAT, [1, 3]);
  g.floatTensor('W', w, [2, 3]);
  g.output(g.nameOutput(g.op1('MatMul', ['x', g.op1('Transpose', ['W'], { perm: [1, 0] })]), 'y'), DataType.FLOAT, [1, 2]);
  return g.model('transposed');
}

describe('θ inside an ORT-format model (rebuild-session weights)', () => {
  it('a session made from the bytes computes what the encoded graph does, and one made after θ changes sees the change', async () => {
    const c = PRESETS.tiny;
    const weights = initDecoderWeights(c, 4);
    const graph = buildDecoder(c, weights);
    const model = await ortFormatModel(graph, weights, options, 'tiny', INLINE_SESSION_LIMIT);
    model.views.forEach((v, i) => expect(v).toEqual(weights[i].data));
    const rows = [[256, 10, 20, 30], [256, 7]];
    const before = await createOrtFormatSession(model, options, 'tiny');
    const expected = await fullLogits(await session(graph), c, rows);
    const got = await fullLogits(before, c, rows);
    // Not bit for bit: the two sessions' optimized graphs may sum in another order.
    got.forEach((row, b) => row.forEach((pos, j) => expect(maxAbsDiff(pos, expected[b][j])).toBeLessThan(1e-5)));
    await before.release();
    // Every weight scaled in place, then a new session: the same as a graph encoded from the scaled weights.
    for (const v of model.views) for (let i = 0; i < v.length; i++) v[i] *= 1.25;
    const scaled = weights.map((w) => ({ ...w, data: w.data.map((x) => Math.fround(x * 1.25)) }));
    const after = await fullLogits(await createOrtFormatSession(model, options, 'tiny'), c, rows);
    const reference = await fullLogits(await session(buildDecoder(c, scaled)), c, rows);
    after.forEach((row, b) => row.forEach((pos, j) => expect(maxAbsDiff(pos, reference[b][j])).toBeLessThan(1e-5)));
    expect(maxAbsDiff(after[0][3], got[0][3])).toBeGreaterThan(1e-3);
  });

  it('a graph past the inline limit reaches onnxruntime as model.onnx + external data, and its weights land in the bytes all the same', async () => {
    const c = PRESETS.tiny;
    const weights = initDecoderWeights(c, 4);
    const graph = buildDecoder(c, weights);
    // Limit 0: every graph takes the files' way, as one of 1 GiB or more does.
    const viaFiles = await ortFormatModel(graph, weights, options, 'tiny', 0);
    const inMemory = await ortFormatModel(graph, weights, options, 'tiny', INLINE_SESSION_LIMIT);
    viaFiles.views.forEach((v, i) => expect(v).toEqual(weights[i].data));
    const rows = [[256, 10, 20, 30]];
    const [a] = await fullLogits(await createOrtFormatSession(viaFiles, options, 'tiny'), c, rows);
    const [b] = await fullLogits(await createOrtFormatSession(inMemory, options, 'tiny'), c, rows);
    expect(maxAbsDiff(a[3], b[3])).toBeLessThan(1e-5);
  });

  it('saves the graph unoptimized, so no weight is folded into a constant that later edits of θ miss', async () => {
    const w = Float32Array.from([1, 2, 3, 4, 5, 6]);
    const model = await ortFormatModel(transposedMatMul(w), [{ name: 'W', dims: [2, 3], data: w }], options, 'transposed', INLINE_SESSION_LIMIT);
    const x = new ort.Tensor('float32', Float32Array.from([1, 1, 1]), [1, 3]);
    const y = async () => Array.from((await (await createOrtFormatSession(model, options, 'transposed')).run({ x })).y.data as Float32Array);
    expect(await y()).toEqual([6, 15]);
    model.views[0].set([2, 4, 6, 8, 10, 12]);
    expect(await y()).toEqual([12, 30]);
  });

  it('says which weight it could not place', async () => {
    const w = Float32Array.from([1, 2, 3, 4, 5, 6]);
    const graph = transposedMatMul(w);
    await expect(ortFormatModel(graph, [{ name: 'W', dims: [2, 3], data: w }, { name: 'not-in-the-graph', dims: [2], data: Float32Array.from([1, 2]) }], options, 'transposed', INLINE_SESSION_LIMIT)).rejects.toThrow(
      'transposed: weight not-in-the-graph is not in it verbatim (the ORT-format save changed it)',
    );
  });

  it('an engine with rebuild-session weights keeps θ in one ORT-format buffer on one switch thread, tensor by tensor on more', async () => {
    // (test/engine/perturbation-pool.test.ts checks that both serve the same members, before and after an update.)
    // A saved export directory too, so the loader's tensors (external data read in) take the same path.
    const dir = mkdtempSync(join(tmpdir(), 'esopt-ort-format-'));
    savePreset(dir, 'tiny', 9);
    for (const model of [{ preset: 'tiny' as const, seed: 9 }, { dir }]) {
      const [one, three] = await Promise.all([1, 3].map((switchThreads) => createEngine({ model, mode: 'full', fullModeWeights: 'rebuild-session', switchThreads })));
      const buffers = (e: typeof one) => new Set(e.segments().map((s) => s.data.buffer)).size;
      expect(buffers(one)).toBe(1);
      expect(buffers(three)).toBe(three.segments().length);
      await Promise.all([one.close(), three.close()]);
    }
    rmSync(dir, { recursive: true, force: true });
  });
});
