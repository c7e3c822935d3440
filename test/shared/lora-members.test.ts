import { describe, expect, it } from 'vitest';
import { initLoraAdapters, loraLayout, mergeLora } from '../../shared/lora.ts';
import { adaptedMatmul, memberAdapters } from '../../shared/lora-members.ts';
import { noise } from '../../shared/noise.ts';

const layout = loraLayout([{ name: 'model.layers.0.mlp.up_proj', in: 10, out: 7 }], { rank: 3, alpha: 6 });
const slot = layout.slots[0];

describe('LoRA-ES members', () => {
  const theta = initLoraAdapters(layout, 1);
  const key = (member: number) => ({ runSeed: 4, iteration: 2, member });

  it('perturb the adapters with the member stream and leave θ alone', () => {
    const before = theta.slice();
    const m = memberAdapters(theta, layout, key(3), 0.05);
    expect(theta).toEqual(before);
    const eps = noise(key(3), layout.length);
    for (let i = 0; i < m.length; i++) expect(m[i]).toBeCloseTo(theta[i] + 0.05 * eps[i], 6);
    expect(memberAdapters(theta, layout, key(3), 0.05)).toEqual(m);
    expect(memberAdapters(theta, layout, key(4), 0.05)).not.toEqual(m);
  });

  it('decode batched with per-row adapters equal to each row merged into W', () => {
    const rows = [0, 1, 2, 3].map((i) => memberAdapters(theta, layout, key(i), 0.1));
    const X = Float32Array.from({ length: rows.length * slot.in }, (_, i) => Math.cos(3 * i));
    const W = Float32Array.from({ length: slot.in * slot.out }, (_, i) => Math.sin(i) * 0.5);
    const Y = adaptedMatmul(X, W, layout, slot, rows);
    rows.forEach((t, b) => {
      const merged = mergeLora(W, t, layout, slot);
      for (let j = 0; j < slot.out; j++) {
        let s = 0;
        for (let i = 0; i < slot.in; i++) s += X[b * slot.in + i] * merged[i * slot.out + j];
        expect(Y[b * slot.out + j]).toBeCloseTo(s, 4);
      }
    });
    // Each row uses its own adapters: row 1's input under row 0's adapters gives another output.
    const swapped = adaptedMatmul(X.subarray(slot.in, 2 * slot.in), W, layout, slot, [rows[0]]);
    expect(Math.max(...swapped.map((v, j) => Math.abs(v - Y[slot.out + j])))).toBeGreaterThan(1e-3);
  });
});
