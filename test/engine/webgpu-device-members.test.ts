/**
 * Full mode's device route (trainer/engine/members/full-device.ts) on webgpu with the run noise
 * 'esopt-device-noise': the member weights it makes on the device equal shared/device-noise.ts's
 * `perturbedWithDeviceNoise` bit for bit (tensors cut into several pieces, read back through a session),
 * untargeted tensors feed θ; greedy tokens of a population (base row, ± members) equal a CPU engine's on the
 * same noise, before and after an update, and after the update the device serves the new θ; a member switch
 * feeds only keys and scalars (one set a group of pieces made by one graph run), θ is uploaded once per θ version, and no member tensor outlives its rows.
 * Skipped, saying so, where Dawn finds no Vulkan adapter.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { perturbedWithDeviceNoise } from '../../shared/device-noise.ts';
import { ask } from '../../shared/es.ts';
import type { GenerateRow, Population } from '../../trainer/engine/engine.ts';
import { createOnnxEngine } from '../../trainer/engine/model/create-engine.ts';
import type { OnnxEngine } from '../../trainer/engine/model/onnx-engine.ts';
import { buildPreset } from '../../trainer/engine/model/open-model.ts';
import { FullDeviceMembers } from '../../trainer/engine/members/full-device.ts';
import { createSession } from '../../trainer/engine/model/sessions.ts';
import { TargetTensors } from '../../trainer/engine/model/target-tensors.ts';
import { PerturbationPool } from '../../trainer/engine/perturbation/perturbation-pool.ts';
import { noiseGroups } from '../../trainer/engine/perturbation/noise-groups.ts';
import { pieceInputs, weightPieces } from '../../trainer/engine/perturbation/weight-pieces.ts';
import { weightsAsInputs } from '../../trainer/engine/perturbation/weights-as-inputs.ts';
import { layoutSegments } from '../../shared/es.ts';
import { noAdapter, skipped } from './helpers/webgpu-adapter.ts';
import { differing } from './helpers/float-bits.ts';
import { readBack } from './helpers/webgpu-read-back.ts';

const PIECE = 5000; // smaller than most of tiny's tensors: they are fed as several pieces, joined in the graph
const GROUP = 24_000; // a few pieces a group, so the engine's members come from several grouped graph runs
const population: Population = { runSeed: 5, iteration: 2, sigma: 0.3, rank: 1, noise: 'esopt-device-noise', members: ask({ population: 4, antithetic: true }) };

function rows(): GenerateRow[] {
  return Array.from({ length: 5 }, (_, k) => ({
    promptIds: Array.from({ length: 4 + k }, (_, i) => 3 + ((i * 13 + k * 7) % 250)),
    member: k === 4 ? { kind: 'base' as const } : { kind: 'member' as const, iteration: 2, index: k },
    sampling: { temperature: 0, topP: 1, topK: 0, seed: 0 },
    maxNewTokens: 6,
    stop: [],
    ignoreEos: true,
  }));
}

describe.skipIf(noAdapter !== null)(`full mode's device route${skipped}`, () => {
  it('makes each member\'s weights on the device, bit for bit the reference\'s; untargeted tensors are θ\'s', async () => {
    const model = buildPreset('tiny', 0);
    const segments = layoutSegments(model.weights);
    const targets = new TargetTensors(model, model.weights.map((_, i) => i), "full mode's tensors");
    const pieces = weightPieces(segments, PIECE);
    expect(pieces.some((p) => p.length > 2)).toBe(true);
    const session = await createSession(pieceInputs(weightsAsInputs(model.graph, model.weights), model.weights, pieces), { executionProvider: 'webgpu' }, 'tiny');
    const serving = await FullDeviceMembers.create({ model, segments, switcher: await PerturbationPool.create(0), targets }, session, pieces);
    try {
      const chosen = targets.select({ include: ['q_proj,down_proj'], exclude: [] })!;
      serving.setPopulation({ ...population, targets: { include: ['q_proj,down_proj'], exclude: [] } });
      const member = population.members[3]; // noise index 1, sign −1
      const got = await serving.withMember(member, readBack);
      segments.forEach((s, si) => {
        const want = chosen.has(si) ? perturbedWithDeviceNoise(s.data, s.offset, { runSeed: 5, iteration: 2, member: 1 }, -0.3) : s.data;
        const joined = Float32Array.from(pieces[si].flatMap((p) => [...got[p.input]]));
        expect(differing(joined, want), s.name).toBe(0);
        if (chosen.has(si)) expect(differing(joined, s.data), s.name).toBeGreaterThan(s.data.length * 0.9);
      });
      const base = await serving.withMember(null, readBack);
      segments.forEach((s, si) => expect(differing(Float32Array.from(pieces[si].flatMap((p) => [...base[p.input]])), s.data)).toBe(0));
      expect(serving.liveTensors).toBe(pieces.flat().length); // θ's pieces only: the member's were released
      const t = serving.transfer;
      expect(t.switches).toBe(1);
      // per group of pieces made by one graph run (all of a run of targeted tensors here): offset, keys and σ
      const groups = noiseGroups(pieces.map((ps, si) => (chosen.has(si) ? ps : null)));
      expect(groups.length).toBeLessThan([...chosen].reduce((a, si) => a + pieces[si].length, 0));
      expect(t.noiseRuns).toBe(groups.length);
      expect(t.switchHostToDevice).toBe(16 * groups.length);
      expect(t.switchDeviceToHost).toBe(0);
      expect(t.thetaUploads).toBe(1);
      // a population on the default noise has no device route here
      expect(() => serving.setPopulation({ ...population, noise: undefined })).toThrow(/a population on "esopt-noise" needs an engine made without it/);
    } finally {
      await serving.close();
    }
    expect(serving.liveTensors).toBe(0);
  }, 60_000);

  describe('greedy tokens equal the CPU engine\'s, before and after an update', () => {
    let device: OnnxEngine;
    let cpu: OnnxEngine;
    beforeAll(async () => {
      const options = { model: { preset: 'tiny' as const, seed: 0 }, mode: 'full' as const, noise: 'esopt-device-noise' as const, prefixCacheBytes: 0 };
      device = await createOnnxEngine(buildPreset('tiny', 0), { ...options, executionProvider: 'webgpu', devicePieceElements: PIECE, deviceGroupElements: GROUP });
      cpu = await createOnnxEngine(buildPreset('tiny', 0), { ...options, executionProvider: 'cpu' });
    });
    afterAll(async () => {
      await device?.close();
      await cpu?.close();
    });

    it('serves members from θ on the device, and the new θ after an update', async () => {
      expect(device.memberRoute).toBe('device');
      expect(cpu.memberRoute).toBe('host');
      const pieceCount = device.liveRouteTensors;
      const tokens = async (e: OnnxEngine) => (await e.generate(rows())).map((r) => r.tokenIds);
      for (const e of [device, cpu]) e.setPopulation(population);
      const before = await tokens(device);
      expect(before).toEqual(await tokens(cpu));
      expect(new Set(before.map((t) => t.join())).size).toBeGreaterThan(2); // the members decode differently
      expect(device.liveDeviceTensors).toBe(0);
      expect(device.liveRouteTensors).toBe(pieceCount);
      expect(device.switchTransfer).toMatchObject({ switches: 4, switchDeviceToHost: 0, thetaUploads: 1 });
      // θ's pieces made in groups of up to GROUP elements: a graph run and 16 host bytes a group, a switch
      const groups = noiseGroups(weightPieces(layoutSegments(buildPreset('tiny', 0).weights), PIECE), GROUP).length;
      expect(groups).toBeGreaterThan(4);
      expect(groups).toBeLessThan(pieceCount / 2);
      expect(device.switchTransfer!.noiseRuns).toBe(4 * groups);
      expect(device.switchTransfer!.switchHostToDevice).toBe(4 * 16 * groups);

      const update = { runSeed: 5, iteration: 2, coefficients: [{ noiseIndex: 0, coef: 0.25 }, { noiseIndex: 1, coef: -0.2 }], rank: 1, noise: 'esopt-device-noise' as const };
      for (const e of [device, cpu]) await e.applyUpdate(update);
      expect(device.switchTransfer!.thetaUploads).toBe(2);
      const after = await tokens(device);
      expect(after).toEqual(await tokens(cpu));
      expect(after[4]).not.toEqual(before[4]); // the base row decodes the new θ
      expect(device.liveRouteTensors).toBe(pieceCount);
    }, 60_000);
  });
});
