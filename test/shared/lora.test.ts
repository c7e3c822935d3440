import { describe, expect, it } from 'vitest';
import { initLoraAdapters, loraFactors, loraLayout, LoraOptions, mergeLora } from '../../shared/lora.ts';

const targets = [
  { name: 'layers.0.self_attn.q_proj', in: 8, out: 6 },
  { name: 'layers.0.mlp.down_proj', in: 12, out: 8 },
];

describe('LoraOptions', () => {
  it('names the field path of a bad value', () => {
    const bad = LoraOptions.safeParse({ rank: 0, alpha: -1, targets: { include: [''] } });
    expect(bad.success).toBe(false);
    const paths = bad.error!.issues.map((i) => i.path.join('.'));
    expect(paths).toEqual(expect.arrayContaining(['rank', 'alpha', 'targets.include.0']));
    expect(LoraOptions.safeParse({ rank: 4, alpha: 8, dropout: 0.1 }).success).toBe(false);
    expect(LoraOptions.parse({ rank: 4, alpha: 8 }).targets).toBe('all-linear');
  });
});

describe('LoRA adapters', () => {
  const layout = loraLayout(targets, { rank: 4, alpha: 8 });

  it('lays out A (r×in) then B (out×r) per matrix, scale alpha/r', () => {
    expect(layout.scale).toBe(2);
    expect(layout.length).toBe(4 * (8 + 6) + 4 * (12 + 8));
    expect(layout.slots.map((s) => [s.aOffset, s.bOffset])).toEqual([[0, 32], [56, 104]]);
    expect(() => loraLayout([], { rank: 4, alpha: 8 })).toThrow(/no matrix/);
  });

  it('initialises A Kaiming-uniform within ±1/√in from the seed and B to zero', () => {
    const theta = initLoraAdapters(layout, 7);
    for (const s of layout.slots) {
      const { A, B } = loraFactors(theta, layout, s);
      const bound = 1 / Math.sqrt(s.in);
      expect(A.every((v) => Math.abs(v) <= bound && v !== 0)).toBe(true);
      expect(Math.max(...A)).toBeGreaterThan(bound / 2);
      expect(Math.min(...A)).toBeLessThan(-bound / 2);
      expect(B.every((v) => v === 0)).toBe(true);
    }
    expect(initLoraAdapters(layout, 7)).toEqual(theta);
    expect(initLoraAdapters(layout, 8)).not.toEqual(theta);
    // A slot's values do not depend on the slots before it.
    const alone = initLoraAdapters(loraLayout([targets[0]], { rank: 4, alpha: 8 }), 7);
    expect(alone.subarray(0, 32)).toEqual(theta.subarray(0, 32));
  });

  it('merged W gives x·W + scale·(x·Aᵀ)·Bᵀ, and W itself is left unchanged', () => {
    const theta = initLoraAdapters(layout, 3);
    for (let i = 0; i < theta.length; i++) if (theta[i] === 0) theta[i] = Math.sin(i + 1) * 0.3; // a trained B
    const s = layout.slots[1];
    const W = Float32Array.from({ length: s.in * s.out }, (_, i) => Math.cos(i));
    const before = W.slice();
    const merged = mergeLora(W, theta, layout, s);
    expect(W).toEqual(before);
    const { A, B } = loraFactors(theta, layout, s);
    const r = layout.rank;
    const x = Float64Array.from({ length: s.in }, (_, i) => (i % 3) - 1.2);
    for (let j = 0; j < s.out; j++) {
      let viaMerged = 0;
      let viaBase = 0;
      for (let i = 0; i < s.in; i++) {
        viaMerged += x[i] * merged[i * s.out + j];
        viaBase += x[i] * W[i * s.out + j];
      }
      let viaAdapter = 0;
      for (let k = 0; k < r; k++) {
        let xa = 0;
        for (let i = 0; i < s.in; i++) xa += x[i] * A[k * s.in + i];
        viaAdapter += xa * B[j * r + k];
      }
      expect(viaMerged).toBeCloseTo(viaBase + layout.scale * viaAdapter, 4);
    }
    expect(merged).not.toEqual(W);
  });
});
