import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ask, layoutSegments, type ParameterSegment } from '../../shared/es.ts';
import { hashTheta } from '../../shared/theta-hash.ts';
import type { GenerateRow } from '../../trainer/engine/engine.ts';
import { createEngine } from '../../trainer/engine/model/create-engine.ts';
import { perturb, restore, switchPerturbation, type Perturbation } from '../../trainer/engine/perturbation/exact-perturbation.ts';
import { fixupEntries } from '../../trainer/engine/perturbation/fixup-list.ts';
import { dealTensors, PerturbationPool } from '../../trainer/engine/perturbation/perturbation-pool.ts';

// Tensors off the chunk grid, with values across binades (so fix-ups happen), two of them views onto one buffer.
function makeTheta(): ParameterSegment[] {
  let seed = 777;
  const rand = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
  const value = (k: number) => [0, 1, -1, 1e-40, 0.02 * (rand() - 0.5), 1e-4 * rand(), 3 * (rand() - 0.5)][k % 7];
  const fill = (n: number) => Float32Array.from({ length: n }, (_, k) => value(k));
  const shared = fill(9000);
  return layoutSegments([
    { name: 'a', data: fill(70000) },
    { name: 'b', data: fill(5) },
    { name: 'c.first', data: shared.subarray(0, 4100) },
    { name: 'd', data: fill(33333) },
    { name: 'c.second', data: shared.subarray(4100) },
    { name: 'e', data: fill(16387) },
    { name: 'f', data: fill(41000) },
  ]);
}

const bits = (segs: readonly ParameterSegment[]) => segs.map((s) => Buffer.from(s.data.buffer, s.data.byteOffset, s.data.byteLength).toString('hex'));
const fixupLists = (p: Perturbation) => p.fixups.map(fixupEntries);
const key = { runSeed: 4, iteration: 7, member: 2 };

describe('dealTensors', () => {
  it('gives every tensor to one group, keeps views onto one buffer together and balances the sizes', () => {
    const theta = makeTheta();
    const groups = dealTensors(theta, 3);
    expect(groups.flat().sort((x, y) => x - y)).toEqual(theta.map((_, i) => i));
    expect(groups.findIndex((g) => g.includes(2))).toBe(groups.findIndex((g) => g.includes(4)));
    const totals = groups.map((g) => g.reduce((a, i) => a + theta[i].data.length, 0));
    // largest-first into the lightest group: no group exceeds the ideal share by more than the largest unit
    expect(Math.max(...totals)).toBeLessThanOrEqual(theta.reduce((a, s) => a + s.data.length, 0) / 3 + 70000);
    expect(dealTensors(theta, 1)).toEqual([theta.map((_, i) => i)]);
  });
});

describe('PerturbationPool', () => {
  let pool: PerturbationPool;
  beforeAll(async () => {
    pool = await PerturbationPool.create(2);
  });
  afterAll(() => pool.close());

  it('perturbs, switches and restores on three threads bit for bit as one thread does, fix-ups included', async () => {
    expect(pool.threads).toBe(3);
    const one = makeTheta();
    const many = makeTheta();
    const original = bits(one);
    for (const c of [1e-3, -0.02, 2]) {
      const p1 = perturb(one, key, c);
      const pm = await pool.perturb(many, key, c);
      expect(bits(many)).toEqual(bits(one));
      expect(fixupLists(pm)).toEqual(fixupLists(p1));
      expect(pm).toMatchObject({ key, c, fixupCount: p1.fixupCount });
      if (c === 2) expect(p1.fixupCount).toBeGreaterThan(100); // the saved-element write-back is exercised

      const s1 = switchPerturbation(one, p1, -c);
      const sm = await pool.switchTo(many, pm, -c);
      expect(bits(many)).toEqual(bits(one));
      expect(fixupLists(sm)).toEqual(fixupLists(s1));

      restore(one, s1);
      await pool.restore(many, sm);
      expect(bits(many)).toEqual(original);
    }
    // the lent tensors came back as whole views; the two views onto one buffer still share it
    expect(many.map((s) => s.data.length)).toEqual(one.map((s) => s.data.length));
    expect(many[2].data.buffer).toBe(many[4].data.buffer);
  });

  it('a failing call reports why and still gives back every lent tensor unchanged', async () => {
    const theta = makeTheta();
    const before = bits(theta);
    await expect(pool.perturb(theta, { ...key, member: -1 }, 1e-3)).rejects.toThrow(/perturb on 3 threads failed: noise key member must be a uint32/);
    expect(bits(theta)).toEqual(before);
    // and the pool still works
    await pool.restore(theta, await pool.perturb(theta, key, 1e-3));
    expect(bits(theta)).toEqual(before);
  });

  it('a thread that exits while idle only loses its share of the work', async () => {
    const small = await PerturbationPool.create(2);
    const running = (small as unknown as { running: Array<{ terminate(): Promise<number> }> }).running;
    await running[0].terminate();
    await new Promise((r) => setImmediate(r));
    expect(small.threads).toBe(2);
    const theta = makeTheta();
    const reference = makeTheta();
    const p = await small.perturb(theta, key, 0.01);
    const q = perturb(reference, key, 0.01);
    expect(bits(theta)).toEqual(bits(reference));
    expect(fixupLists(p)).toEqual(fixupLists(q));
    await small.close();
  });

  it('a thread that dies holding tensors fails the call and every later one: θ is incomplete', async () => {
    const crashing = await PerturbationPool.create(1, new URL('./helpers/exiting-perturbation-thread.ts', import.meta.url));
    const theta = makeTheta();
    await expect(crashing.perturb(theta, key, 1e-3)).rejects.toThrow(/perturbation thread 0 failed holding θ's tensors .+ \(thread exited with code 3\); θ is lost: reload it from the last checkpoint/);
    await expect(crashing.perturb(theta, key, 1e-3)).rejects.toThrow(/θ is lost/);
    await crashing.close();
  });
});

describe('full-mode engine on several threads', () => {
  const row = (index: number | null): GenerateRow => ({
    promptIds: [256, 90, 91, 92],
    member: index === null ? { kind: 'base' } : { kind: 'member', iteration: 0, index },
    sampling: { temperature: 0.8, topP: 1, topK: 0, seed: 6 },
    maxNewTokens: 10,
    stop: [],
  });

  it('serves members exactly as one thread does, in both weight modes, and leaves θ whole and restored', async () => {
    const members = ask({ population: 6, antithetic: true });
    const outputs: number[][][] = [];
    for (const fullModeWeights of ['inputs', 'rebuild-session'] as const) {
      for (const switchThreads of [1, 3]) {
        const engine = await createEngine({ model: { preset: 'tiny', seed: 9 }, mode: 'full', fullModeWeights, switchThreads });
        engine.setPopulation({ runSeed: 5, iteration: 0, sigma: 0.05, rank: 1, members });
        const lengths = engine.segments().map((s) => s.data.length);
        const hash = hashTheta(engine.segments());
        const served = await engine.generate([5, 0, null, 4, 1, 2].map(row));
        expect(engine.segments().map((s) => s.data.length)).toEqual(lengths);
        expect(hashTheta(engine.segments())).toBe(hash);
        // an update after lent-and-returned tensors reaches the model: rebuild-session makes its session again
        // (from the ORT-format bytes θ lives in on one thread, by encoding the graph on three)
        await engine.applyUpdate({ runSeed: 5, iteration: 0, coefficients: [{ noiseIndex: 0, coef: 0.05 }], rank: 1 });
        const [after] = await engine.generate([row(null)]);
        outputs.push([...served, after].map((r) => r.tokenIds));
        await engine.close();
      }
    }
    for (const o of outputs) expect(o).toEqual(outputs[0]);
    expect(outputs[0][6]).not.toEqual(outputs[0][2]); // the update changed what the base model says
    expect(outputs[0][1]).not.toEqual(outputs[0][3]); // partners differ: the perturbation did something
  });

  it('refuses a thread count that is not a positive integer', async () => {
    await expect(createEngine({ model: { preset: 'tiny', seed: 9 }, mode: 'full', switchThreads: 0 })).rejects.toThrow(/switchThreads must be an integer ≥ 1, got 0/);
  });
});
