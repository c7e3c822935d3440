/**
 * Full mode's device route making a member's pieces in groups, one noise-graph run a group
 * (trainer/engine/perturbation/noise-groups.ts, device-noise-graph.ts's grouped form, serving/full-device.ts):
 * groups join only consecutive targeted pieces of one key block, up to the size asked; the grouped graph
 * gives the reference's bits on the CPU provider and, where Dawn finds a Vulkan adapter, runs every θ-sized
 * node (Concat and Split included) on the WebGPU provider; the route's grouped member weights equal
 * `perturbedWithDeviceNoise` bit for bit with groups spanning tensors, tensors cut into pieces, a key-block
 * boundary inside a tensor and targets that skip tensors, in fewer graph runs than a run per piece, feeding
 * 16 host bytes a group and leaving no member tensor behind.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
import { BLOCK, deviceNoiseKeys, perturbedWithDeviceNoise } from '../../shared/device-noise.ts';
import { layoutSegments, type ParameterSegment } from '../../shared/es.ts';
import type { Population } from '../../trainer/engine/engine.ts';
import { DeviceTensors } from '../../trainer/engine/generation/device-tensors.ts';
import { encodeModel } from '../../trainer/engine/onnx/proto.ts';
import { buildPreset } from '../../trainer/engine/model/open-model.ts';
import { FullDeviceMembers } from '../../trainer/engine/members/full-device.ts';
import { createSession } from '../../trainer/engine/model/sessions.ts';
import { TargetTensors } from '../../trainer/engine/model/target-tensors.ts';
import { groupedDeviceNoiseGraph, SPLIT_FAN_OUT } from '../../trainer/engine/perturbation/device-noise-graph.ts';
import { noiseGroups } from '../../trainer/engine/perturbation/noise-groups.ts';
import { PerturbationPool } from '../../trainer/engine/perturbation/perturbation-pool.ts';
import { pieceInputs, weightPieces } from '../../trainer/engine/perturbation/weight-pieces.ts';
import { weightsAsInputs } from '../../trainer/engine/perturbation/weights-as-inputs.ts';
import { ask } from '../../shared/es.ts';
import { noAdapter, skipped } from './helpers/webgpu-adapter.ts';
import { differing } from './helpers/float-bits.ts';
import { readBack } from './helpers/webgpu-read-back.ts';

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

const seg = (name: string, length: number, offset: number): ParameterSegment => ({ name, data: new Float32Array(length), offset });

describe('noise groups', () => {
  it('join consecutive pieces across tensors up to the size asked; a block boundary, a gap or a skipped tensor ends a group', () => {
    // a: [BLOCK−30, BLOCK−10), b: [BLOCK−10, BLOCK+15) crossing the boundary, c: [BLOCK+15, BLOCK+20), d after a gap
    const segments = [seg('a', 20, BLOCK - 30), seg('b', 25, BLOCK - 10), seg('c', 5, BLOCK + 15), seg('d', 8, BLOCK + 100), seg('e', 4, BLOCK + 108), seg('f', 3, BLOCK + 112)];
    const pieces = weightPieces(segments, 8);
    const groups = noiseGroups(pieces, 16);
    const spans = groups.map((g) => g.pieces.map((p) => p.input).join(' '));
    // b is cut at the boundary (b#1 ends it, b#2 starts the next block); c does not fit beside b#2 b#3
    expect(spans).toEqual(['a#0 a#1', 'a#2 b#0 b#1', 'b#2 b#3', 'c#0', 'd#0 e#0 f#0']);
    for (const g of groups) {
      expect(g.count).toBe(g.pieces.reduce((a, p) => a + p.count, 0));
      expect(g.count).toBeLessThanOrEqual(16);
      expect(Math.floor(g.offset / BLOCK)).toBe(Math.floor((g.offset + g.count - 1) / BLOCK));
      g.pieces.forEach((p, j) => j > 0 && expect(p.offset).toBe(g.pieces[j - 1].offset + g.pieces[j - 1].count));
    }
    // e skipped: d and f are not joined across it
    expect(noiseGroups(pieces.map((ps, i) => (i === 4 ? null : ps)), 16).map((g) => g.pieces.map((p) => p.input).join(' ')).slice(-2)).toEqual(['d#0', 'f#0']);
    // 1: a group per piece; a piece longer than the size asked is a group alone
    expect(noiseGroups(pieces, 1).map((g) => g.pieces.length)).toEqual(pieces.flat().map(() => 1));
    expect(noiseGroups(weightPieces(segments), 10).map((g) => g.count)).toEqual([20, 10, 15, 5, 8, 7]);
    expect(() => noiseGroups(pieces, 2 ** 31)).toThrow(/deviceGroupElements must be an integer in \[1, 2147483647\], got 2147483648/);
  });

  it('the grouped graph gives the reference\'s bits for each piece on the CPU provider', async () => {
    const lengths = [7, 3000, 1, 40, 512, 9, 9, 9, 100, 33, 2, 2, 2, 2, 2, 70, 5]; // more than one Split's outputs
    expect(lengths.length).toBeGreaterThan(SPLIT_FAN_OUT * 2);
    const total = lengths.reduce((a, l) => a + l, 0);
    const offset = BLOCK - total; // the last element is the block's: index arithmetic wraps near the top of uint32 as the reference's
    const key = { runSeed: 3, iteration: 9, member: 4 };
    const [k0, k1] = deviceNoiseKeys(key, 0);
    const theta = Float32Array.from({ length: total }, (_, i) => Math.cos(i * 0.11) * 0.07);
    const s = await ort.InferenceSession.create(encodeModel(groupedDeviceNoiseGraph(lengths)), { executionProviders: ['cpu'] });
    const feeds: Record<string, ort.Tensor> = {
      offset: new ort.Tensor('uint32', Uint32Array.of(offset), [1]),
      k0: new ort.Tensor('uint32', Uint32Array.of(k0), [1]),
      k1: new ort.Tensor('uint32', Uint32Array.of(k1), [1]),
      sigma: new ort.Tensor('float32', Float32Array.of(0.02), [1]),
    };
    let at = 0;
    lengths.forEach((l, j) => {
      feeds[`theta.${j}`] = new ort.Tensor('float32', theta.slice(at, at + l), [l]);
      at += l;
    });
    const out = await s.run(feeds);
    await s.release();
    const want = perturbedWithDeviceNoise(theta, offset, key, 0.02);
    const got = Float32Array.from(lengths.flatMap((_, j) => [...(out[`perturbed.${j}`].data as Float32Array)]));
    expect(differing(got, want)).toBe(0);
    expect(differing(want, theta)).toBeGreaterThan(total * 0.99);
    expect(() => groupedDeviceNoiseGraph([5])).toThrow(/at least 2 pieces/);
    expect(() => groupedDeviceNoiseGraph([2 ** 30, 2 ** 30])).toThrow(/at most 2147483647 elements/);
  });
});

const population: Population = { runSeed: 5, iteration: 2, sigma: 0.3, rank: 1, noise: 'esopt-device-noise', members: ask({ population: 4, antithetic: true }) };

describe.skipIf(noAdapter !== null)(`grouped device noise on webgpu${skipped}`, () => {
  it('runs every θ-sized node, Concat and Split included, on the WebGPU provider, with nothing copied', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'esopt-device-groups-'));
    dirs.push(dir);
    const lengths = [3000, 20_000, 77, 9000, 1, 6000, 4000, 8000, 123, 5000]; // two levels of Splits
    const total = lengths.reduce((a, l) => a + l, 0);
    const s = await ort.InferenceSession.create(encodeModel(groupedDeviceNoiseGraph(lengths)), { executionProviders: ['webgpu'], preferredOutputLocation: 'gpu-buffer', enableProfiling: true, profileFilePrefix: join(dir, 'profile') });
    const device = await DeviceTensors.create({ layers: 0 });
    try {
      const theta = Float32Array.from({ length: total }, (_, i) => Math.sin(i * 0.3) * 0.05);
      let at = 0;
      const onDevice = await device.upload(Object.fromEntries(lengths.map((l, j) => [`theta.${j}`, new ort.Tensor('float32', theta.slice(at, (at += l)), [l])])));
      const u32 = (v: number) => new ort.Tensor('uint32', Uint32Array.of(v), [1]);
      const key = { runSeed: 1, iteration: 2, member: 3 };
      const [k0, k1] = deviceNoiseKeys(key, 0);
      const out = await s.run({ ...onDevice, offset: u32(17), k0: u32(k0), k1: u32(k1), sigma: new ort.Tensor('float32', Float32Array.of(0.1), [1]) });
      device.adopt(Object.values(out));
      expect(Object.values(out).every((t) => t.location === 'gpu-buffer')).toBe(true);
      s.endProfiling();
      const events = JSON.parse(readFileSync(join(dir, readdirSync(dir)[0]), 'utf8')) as Array<{ cat: string; args?: { op_name?: string; provider?: string; output_size?: string } }>;
      const nodes = events.filter((e) => e.cat === 'Node' && e.args?.provider).map((e) => e.args!);
      // the Range included: it is made each run, not folded into an initializer of the group's size
      const placed = new Set(nodes.filter((a) => Number(a.output_size) >= 4 * Math.min(...lengths.filter((l) => l > 1000))).map((a) => `${a.op_name} on ${a.provider}`));
      expect([...placed].sort()).toEqual(['Add', 'Cast', 'Concat', 'Div', 'Mul', 'Range', 'Split', 'Sub'].map((op) => `${op} on WebGpuExecutionProvider`));
      expect(nodes.filter((a) => a.provider !== 'WebGpuExecutionProvider').map((a) => Number(a.output_size))).toSatisfy((sizes: number[]) => sizes.every((b) => b <= 8));
      expect(nodes.filter((a) => /Memcpy/.test(a.op_name ?? ''))).toEqual([]);
      const back = await readBack(out);
      const got = Float32Array.from(lengths.flatMap((_, j) => [...back[`perturbed.${j}`]]));
      expect(differing(got, perturbedWithDeviceNoise(theta, 17, key, 0.1))).toBe(0);
      device.dispose(Object.values(out));
      device.dispose(Object.values(onDevice));
      expect(device.live).toBe(0);
    } finally {
      await device.release();
      await s.release();
    }
  }, 30_000);
});

describe.skipIf(noAdapter !== null)(`full mode's device route in groups${skipped}`, () => {
  it('makes a member\'s targeted pieces in groups, bit for bit the reference\'s, across tensors, pieces, a key-block boundary and skipped tensors', async () => {
    const model = buildPreset('tiny', 0);
    const laid = layoutSegments(model.weights);
    // the stream shifted so that a key block ends inside a targeted tensor's middle
    const chosenNames = model.weights.map((w) => w.name).filter((n) => /q_proj|k_proj|down_proj|up_proj/.test(n));
    const boundaryIn = laid.find((s) => /down_proj/.test(s.name))!;
    const shift = BLOCK - (boundaryIn.offset + Math.floor(boundaryIn.data.length / 2) + 123);
    const segments = laid.map((s) => ({ ...s, offset: s.offset + shift }));
    const targets = new TargetTensors(model, model.weights.map((_, i) => i), "full mode's tensors");
    const pieces = weightPieces(segments, 3000);
    const made = async (groupElements: number) => {
      const session = await createSession(pieceInputs(weightsAsInputs(model.graph, model.weights), model.weights, pieces), { executionProvider: 'webgpu' }, 'tiny');
      const serving = await FullDeviceMembers.create({ model, segments, switcher: await PerturbationPool.create(0), targets }, session, pieces, groupElements);
      const selection = { include: ['q_proj,k_proj,down_proj,up_proj'], exclude: [] };
      serving.setPopulation({ ...population, targets: selection });
      const chosen = targets.select(selection)!;
      expect([...chosen].map((si) => segments[si].name).sort()).toEqual([...chosenNames].sort());
      const got = await serving.withMember(population.members[2], readBack); // noise index 1, sign +1
      const t = serving.transfer;
      const live = serving.liveTensors;
      return { serving, got, chosen, t, live };
    };
    const grouped = await made(10_000);
    const perPiece = await made(1);
    try {
      const groups = noiseGroups(pieces.map((ps, si) => (grouped.chosen.has(si) ? ps : null)), 10_000);
      // the groups this test means to cover
      expect(groups.some((g) => new Set(g.pieces.map((p) => p.input.split('#')[0])).size > 1)).toBe(true); // spans tensors
      expect(groups.some((g) => g.pieces.length > 2)).toBe(true);
      expect(groups.some((g) => g.offset + g.count === BLOCK)).toBe(true); // ends at the boundary, inside a tensor
      expect(groups.some((g) => g.offset === BLOCK)).toBe(true);
      expect(grouped.chosen.size).toBeLessThan(segments.length); // some tensors are skipped
      for (const { got } of [grouped, perPiece]) {
        segments.forEach((s, si) => {
          const want = grouped.chosen.has(si) ? perturbedWithDeviceNoise(s.data, s.offset, { runSeed: 5, iteration: 2, member: 1 }, 0.3) : s.data;
          const joined = Float32Array.from(pieces[si].flatMap((p) => [...got[p.input]]));
          expect(differing(joined, want), s.name).toBe(0);
        });
      }
      const targeted = [...grouped.chosen].reduce((a, si) => a + pieces[si].length, 0);
      expect(perPiece.t.noiseRuns).toBe(targeted);
      expect(grouped.t.noiseRuns).toBe(groups.length);
      expect(groups.length).toBeLessThan(targeted / 2);
      expect(grouped.t.noiseNodes).toBeLessThan(perPiece.t.noiseNodes / 2);
      // per group: offset, k0, k1 (uint32) and σ (float32); the Split's sizes are in the graph
      expect(grouped.t.switchHostToDevice).toBe(16 * groups.length);
      expect(grouped.t.switchDeviceToHost).toBe(0);
      for (const r of [grouped, perPiece]) expect(r.live).toBe(pieces.flat().length); // θ's pieces only
    } finally {
      await perPiece.serving.close().catch(() => undefined);
      await grouped.serving.close().catch(() => undefined);
    }
    expect(grouped.serving.liveTensors).toBe(0);
  }, 60_000);
});
