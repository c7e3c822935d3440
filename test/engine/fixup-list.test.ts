import { describe, expect, it } from 'vitest';
import { layoutSegments } from '../../shared/es.ts';
import { fillNoise } from '../../shared/noise.ts';
import { perturb, restore } from '../../trainer/engine/perturbation/exact-perturbation.ts';
import { FixupReader, FixupWriter, fixupEntries } from '../../trainer/engine/perturbation/fixup-list.ts';

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
const bits = (x: number) => ((f32[0] = x), u32[0]);

describe('fix-up lists', () => {
  it('give back θ bit for bit from what the restore computes, for short and long entries alike', () => {
    // one-byte entries (gap < 32, |k| ≤ 3), long gaps, large k, sign changes, −0, subnormals, extremes
    const cases: Array<[number, number, number]> = [
      [0, 0.5, 0.50000006], [1, -1.5, -1.4999999], [31, 3e-39, -2e-39], [32, -0, 0], [5000, 1e-8, 0.25],
      [5001, 3.4e38, -3.4e38], [2 ** 31 + 7, -1e-45, 1e-45], [2 ** 31 + 8, 1, 1],
    ];
    const w = new FixupWriter();
    for (const [index, before, restored] of cases) w.push(index, before, restored);
    const list = w.finish();
    expect(list.count).toBe(cases.length);
    const r = new FixupReader(list);
    for (const [index, before, restored] of cases) {
      expect(r.index).toBe(index);
      expect(bits(r.take(restored))).toBe(bits(before));
    }
    expect(r.index).toBe(Infinity);
    expect(fixupEntries(list).map(([i]) => i)).toEqual(cases.map(([i]) => i));
    expect(() => w.push(3, 1, 1)).toThrow(/ascend/);
  });

  it('cost under 2 % of θ\'s bytes at σ = 1e-3 on weights of std 0.02, where pairs of index and value cost over 8 %', () => {
    const data = new Float32Array(1 << 20);
    fillNoise(data, { runSeed: 5, iteration: 0, member: 9 });
    for (let i = 0; i < data.length; i++) data[i] *= 0.02;
    const original = data.slice();
    const segments = layoutSegments([{ name: 'w', data }]);
    const p = perturb(segments, { runSeed: 1, iteration: 2, member: 3 }, 1e-3);
    const fraction = p.fixupCount / data.length;
    expect(fraction).toBeGreaterThan(0.03); // the case the compact form is for
    expect(p.fixups[0].bytes.length / data.byteLength).toBeLessThan(0.02);
    expect((p.fixupCount * 8) / data.byteLength).toBeGreaterThan(0.08);
    restore(segments, p);
    expect(Buffer.from(data.buffer).equals(Buffer.from(original.buffer))).toBe(true);
  });
});
