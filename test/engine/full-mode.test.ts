import { describe, expect, it } from 'vitest';
import { applyDenseUpdate, ask, layoutSegments, perturbDense, type ParameterSegment } from '../../shared/es.ts';
import { activeNoiseKernel, applyNoise, noise } from '../../shared/noise.ts';
import { hashTheta } from '../../shared/theta-hash.ts';
import { createEngine } from '../../trainer/engine/model/create-engine.ts';
import { PRESETS } from '../../trainer/engine/model/presets.ts';
import { initDecoderWeights } from '../../trainer/engine/model/weights.ts';
import { perturb, perturbWith, restore, switchPerturbationWith } from '../../trainer/engine/perturbation/exact-perturbation.ts';
import { fixupEntries, type FixupList } from '../../trainer/engine/perturbation/fixup-list.ts';
import { forEachNoiseWindow } from '../../trainer/engine/perturbation/noise-windows.ts';

const c = PRESETS.tiny;

function rms(segments: readonly ParameterSegment[]): number {
  let ss = 0;
  let n = 0;
  for (const s of segments) for (const v of s.data) (ss += v * v), n++;
  return Math.sqrt(ss / n);
}

function maxDrift(a: readonly ParameterSegment[], b: readonly Float32Array[]): number {
  let m = 0;
  a.forEach((s, i) => s.data.forEach((v, j) => (m = Math.max(m, Math.abs(v - b[i][j])))));
  return m;
}

describe('full mode perturb/restore', () => {
  it('noise windows visit each θ element with its own ε, as applyNoise does', () => {
    const segs = layoutSegments([5000, 1, 70000, 3].map((n, i) => ({ name: `t${i}`, data: new Float32Array(n) })));
    const viaWindows = segs.map((s) => new Float32Array(s.data.length));
    forEachNoiseWindow(segs, { runSeed: 1, iteration: 2, member: 3 }, (si, from, eps, epsFrom, count) => {
      for (let k = 0; k < count; k++) viaWindows[si][from + k] += eps[epsFrom + k];
    });
    segs.forEach((s, i) => {
      applyNoise(s.data, { runSeed: 1, iteration: 2, member: 3 }, 1, s.offset);
      expect(Array.from(viaWindows[i])).toEqual(Array.from(s.data));
    });
  });

  it('1,000 perturb/restore cycles leave θ bit-identical (plain subtraction would drift past the bound)', () => {
    // a norm (all ones: the worst case for rounding) and a projection of the tiny model
    const picked = initDecoderWeights(c, 8).filter((w) => /layers\.0\.(input_layernorm|self_attn\.q_proj)/.test(w.name));
    const exact = layoutSegments(picked.map((w) => ({ name: w.name, data: w.data.slice() })));
    const plain = layoutSegments(picked.map((w) => ({ name: w.name, data: w.data.slice() })));
    const original = picked.map((w) => w.data.slice());
    const bound = 1e-6 * rms(exact);
    for (let cycle = 0; cycle < 1000; cycle++) {
      const key = { runSeed: 3, iteration: cycle >> 4, member: cycle & 15 };
      const c = (cycle % 2 ? -1 : 1) * 0.002;
      restore(exact, perturb(exact, key, c));
      perturbDense(plain, key, c);
      perturbDense(plain, key, -c);
    }
    expect(maxDrift(exact, original)).toBe(0);
    expect(maxDrift(plain, original)).toBeGreaterThan(bound);
  });

  // Values across binades (zeros of both signs, subnormals, norms at 1, tiny and large weights), in
  // segments that start and end off the stream's chunk grid; coefficients from far below to far above θ.
  const lengths = [5000, 1, 70000, 3, 16387];
  let seed = 12345;
  const rand = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
  const pick = (i: number) => [0, -0, 1e-40, -3e-39, 1, -1, 0.02 * (rand() - 0.5), 1e-4 * rand(), 3 * (rand() - 0.5), 1e-8][i % 10];
  const make = () => { seed = 12345; return layoutSegments(lengths.map((n, i) => ({ name: `t${i}`, data: Float32Array.from({ length: n }, (_, k) => pick(k * 7 + i)) }))); };
  const sameBits = (a: readonly ParameterSegment[], b: readonly ParameterSegment[]) => a.every((s, i) => Buffer.from(s.data.buffer).equals(Buffer.from(b[i].data.buffer)));
  const fixupLists = (p: { fixups: FixupList[] }) => p.fixups.map(fixupEntries);

  it('the WebAssembly exact perturbation equals the JavaScript reference bit for bit, fix-ups included', () => {
    expect(activeNoiseKernel).toBe('wasm');
    for (const [member, c] of [[1, 1e-3], [2, -0.02], [3, 2], [4, 1e-7]] as const) {
      const key = { runSeed: 9, iteration: 4, member };
      const viaWasm = make();
      const viaJs = make();
      const original = make().map((s) => s.data);
      const pw = perturbWith('wasm', viaWasm, key, c);
      const pj = perturbWith('js', viaJs, key, c);
      expect(sameBits(viaWasm, viaJs)).toBe(true);
      expect(fixupLists(pw)).toEqual(fixupLists(pj));
      // the neighbour branch is exercised: some elements differ from RN(θ + c·ε) without being fix-ups
      const neighbours = viaJs.reduce((a, s, i) => {
        const eps = noise(key, s.data.length, s.offset);
        const fixed = new Set(fixupEntries(pj.fixups[i]).map(([index]) => index));
        return a + s.data.filter((t, k) => !fixed.has(k) && t !== Math.fround(original[i][k] + c * eps[k])).length;
      }, 0);
      if (c === 1e-3) expect(neighbours).toBeGreaterThan(0);
      restore(viaWasm, pw);
      // by value: fl32(t − c·ε) gives +0 back for −0, which is the same θ
      viaWasm.forEach((s, i) => expect(s.data.filter((v, k) => v !== original[i][k]).length).toBe(0));
    }
  });

  it("switching to the antithetic partner in one pass equals restore then perturb, bit for bit, in both kernels", () => {
    for (const [member, c] of [[1, 1e-3], [2, -0.02], [3, 2], [4, 1e-7]] as const) {
      const key = { runSeed: 9, iteration: 4, member };
      const sequential = make();
      restore(sequential, perturbWith('js', sequential, key, c));
      const expected = perturbWith('js', sequential, key, -c);
      for (const kernel of ['wasm', 'js'] as const) {
        const segs = make();
        const switched = switchPerturbationWith(kernel, segs, perturbWith(kernel, segs, key, c), -c);
        expect(sameBits(segs, sequential)).toBe(true);
        expect(fixupLists(switched)).toEqual(fixupLists(expected));
        expect(switched).toMatchObject({ key, c: -c, fixupCount: expected.fixupCount });
        // and the switched perturbation restores exactly
        restore(segs, switched);
        const original = make();
        segs.forEach((s, i) => expect(s.data.filter((v, k) => v !== original[i].data[k]).length).toBe(0));
      }
      // c = 2 saves many elements, so the write-back of the first perturbation's saved θ is exercised
      if (c === 2) expect(expected.fixupCount).toBeGreaterThan(100);
    }
  });

  it('a perturbed θ is θ + c·ε to within one float32 rounding per element', () => {
    const [w] = initDecoderWeights(c, 8);
    const segs = layoutSegments([{ name: w.name, data: w.data.slice() }]);
    const dense = w.data.slice();
    applyNoise(dense, { runSeed: 1, iteration: 1, member: 1 }, 0.002);
    const p = perturb(segs, { runSeed: 1, iteration: 1, member: 1 }, 0.002);
    let worst = 0; // |perturbed − RN(θ+δ)| in units of RN(θ+δ)'s relative ulp
    for (let i = 0; i < dense.length; i++) worst = Math.max(worst, Math.abs(segs[0].data[i] - dense[i]) / (Math.abs(dense[i]) * 2 ** -23 + 1e-45));
    expect(worst).toBeLessThanOrEqual(2);
    expect(p.fixupCount).toBeLessThan(dense.length * 0.1);
  });
});

/** A generate row builder: `row(index)` for member `index` of `iteration`, `row(null)` for the base model. */
function rowOf(o: { promptIds: number[]; iteration: number; temperature: number; seed: number; maxNewTokens: number }) {
  return (index: number | null) => ({
    promptIds: o.promptIds,
    member: index === null ? ({ kind: 'base' } as const) : ({ kind: 'member', iteration: o.iteration, index } as const),
    sampling: { temperature: o.temperature, topP: 1, topK: 0, seed: o.seed },
    maxNewTokens: o.maxNewTokens,
    stop: [],
  });
}

describe('full-mode engine', () => {
  it('serves members by perturbing in place, restores θ exactly, and matches a model built with θ + σ·sign·ε', async () => {
    const engine = await createEngine({ model: { preset: 'tiny', seed: 9 }, mode: 'full' });
    const members = ask({ population: 4, antithetic: true });
    engine.setPopulation({ runSeed: 5, iteration: 2, sigma: 0.05, rank: 1, members });
    const hash = hashTheta(engine.segments());
    const row = rowOf({ promptIds: [256, 60, 61, 62], iteration: 2, temperature: 0, seed: 0, maxNewTokens: 12 });
    const pending = engine.generate([row(1), row(null), row(3), row(1)]);
    // queued behind the generation: sees θ restored, never a member's perturbed θ
    const hashDuring = engine.withRestoredWeights((segments) => hashTheta(segments));
    const results = await pending;
    expect(await hashDuring).toBe(hash);
    expect(hashTheta(engine.segments())).toBe(hash);
    expect(results[3].tokenIds).toEqual(results[0].tokenIds);

    // member 3 = noise 1, sign −1, as a separately built dense model
    const dense = initDecoderWeights(c, 9);
    layoutSegments(dense).forEach((s) => applyNoise(s.data, { runSeed: 5, iteration: 2, member: 1 }, -0.05, s.offset));
    const reference = await createEngine({ model: { preset: 'tiny', seed: 9 }, mode: 'full' });
    reference.segments().forEach((s, i) => s.data.set(dense[i].data));
    const [expected] = await reference.generate([row(null)]);
    expect(results[2].tokenIds).toEqual(expected.tokenIds);
    expect(results[2].tokenIds).not.toEqual(results[1].tokenIds);
    await Promise.all([engine.close(), reference.close()]);
  });

  it('antithetic partners served in one call (θ switched between them in one pass) say what each says alone', async () => {
    const engine = await createEngine({ model: { preset: 'tiny', seed: 9 }, mode: 'full' });
    engine.setPopulation({ runSeed: 5, iteration: 0, sigma: 0.05, rank: 1, members: ask({ population: 6, antithetic: true }) });
    const hash = hashTheta(engine.segments());
    const row = rowOf({ promptIds: [256, 80, 81, 82], iteration: 0, temperature: 0.8, seed: 3, maxNewTokens: 12 });
    // both signs of noise 0 and 2, one of noise 1, and the base, out of order: every kind of transition
    const order = [5, 0, null, 4, 1, 2];
    const together = await engine.generate(order.map(row));
    expect(hashTheta(engine.segments())).toBe(hash);
    const alone = [];
    for (const index of order) alone.push((await engine.generate([row(index)]))[0]);
    expect(together.map((r) => r.tokenIds)).toEqual(alone.map((r) => r.tokenIds));
    // the partners really differ, so equal outputs are not a perturbation that did nothing
    expect(together[1].tokenIds).not.toEqual(together[4].tokenIds);
    expect(hashTheta(engine.segments())).toBe(hash);
    await engine.close();
  });

  it('applyUpdate is the shared dense update over every segment', async () => {
    const engine = await createEngine({ model: { preset: 'tiny', seed: 9 }, mode: 'full' });
    const expected = layoutSegments(initDecoderWeights(c, 9));
    const coefficients = [{ noiseIndex: 0, coef: 0.01 }, { noiseIndex: 3, coef: -0.02 }];
    applyDenseUpdate(expected, 5, 2, coefficients, { decay: 0.1 });
    await engine.applyUpdate({ runSeed: 5, iteration: 2, coefficients, rank: 1, decay: 0.1 });
    expect(hashTheta(engine.segments())).toBe(hashTheta(expected));
    await engine.close();
  });

  it("rebuild-session weights serve the same members and updates as θ-as-inputs", async () => {
    const members = ask({ population: 2, antithetic: true });
    const engines = await Promise.all(
      (['inputs', 'rebuild-session'] as const).map((fullModeWeights) => createEngine({ model: { preset: 'tiny', seed: 9 }, mode: 'full', fullModeWeights })),
    );
    const row = rowOf({ promptIds: [256, 70, 71], iteration: 0, temperature: 0.7, seed: 4, maxNewTokens: 10 });
    const outputs = [];
    for (const e of engines) {
      e.setPopulation({ runSeed: 5, iteration: 0, sigma: 0.05, rank: 1, members });
      const served = await e.generate([row(0), row(1), row(null)]);
      await e.applyUpdate({ runSeed: 5, iteration: 0, coefficients: [{ noiseIndex: 0, coef: 0.05 }], rank: 1 });
      const [after] = await e.generate([row(null)]);
      outputs.push([...served, after].map((r) => r.tokenIds));
    }
    expect(outputs[1]).toEqual(outputs[0]);
    expect(outputs[0][3]).not.toEqual(outputs[0][2]); // the update changed what the base model says
    await Promise.all(engines.map((e) => e.close()));
  });
});
