import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { activeNoiseKernel, applyNoise, applyNoiseWith, CHUNK, fillNoise } from '../../shared/noise.ts';
import { ModuleBuilder } from '../../shared/noise-wasm/wasm-assembler.ts';
import { WasmNoiseKernel } from '../../shared/noise-wasm/wasm-noise.ts';
import { webAssembly } from '../../shared/noise-wasm/webassembly-api.ts';

const uint32 = fc.integer({ min: 0, max: 0xffffffff });
const key = fc.record({ runSeed: uint32, iteration: uint32, member: uint32 });

/** Index of the first element where the two arrays differ bit for bit (NaN-safe, −0 ≠ +0), or −1. */
function firstDifference(a: Float32Array | Float64Array, b: Float32Array | Float64Array): number {
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return i;
  return a.length === b.length ? -1 : a.length;
}

function startingTheta(kind: 'f32' | 'f64', n: number, seed: number): Float32Array | Float64Array {
  const theta = kind === 'f32' ? new Float32Array(n) : new Float64Array(n);
  // Varied magnitudes and signs, including −0, so the single rounding of θ + c·ε is exercised.
  for (let i = 0; i < n; i++) theta[i] = i % 97 === 0 ? -0 : Math.sin(seed + i * 0.7) * 10 ** ((i % 7) - 3);
  return theta;
}

describe('WebAssembly noise kernel', () => {
  it('is the kernel in use here (Node 20 has WebAssembly SIMD)', () => {
    expect(activeNoiseKernel).toBe('wasm');
  });

  it('equals the JavaScript kernel bit for bit on random keys, offsets, lengths, coefficients and targets', () => {
    fc.assert(
      fc.property(
        key,
        fc.oneof(
          fc.integer({ min: 0, max: 20 * CHUNK }),
          // Offsets just around chunk boundaries, and far into the stream (chunk index above 2^20).
          fc.tuple(fc.integer({ min: 0, max: 40 }), fc.integer({ min: -3, max: 3 })).map(([k, d]) => Math.max(0, k * CHUNK + d)),
          fc.integer({ min: 2 ** 32, max: 2 ** 40 }),
        ),
        fc.oneof(fc.integer({ min: 0, max: 9 }), fc.integer({ min: 0, max: 6 * CHUNK }), fc.constantFrom(CHUNK - 1, CHUNK, CHUNK + 1, 4 * CHUNK, 5 * CHUNK + 3)),
        fc.oneof(fc.double({ min: -4, max: 4, noNaN: true }), fc.constantFrom(0, 1, -1, 1e-30, 3e5)),
        fc.constantFrom('f32' as const, 'f64' as const),
        fc.integer({ min: 0, max: 5 }),
        (k, offset, count, c, kind, dest) => {
          const js = startingTheta(kind, dest + count + 2, offset);
          const wasm = js.slice();
          applyNoiseWith('js', js, k, c, offset, dest, count);
          applyNoiseWith('wasm', wasm, k, c, offset, dest, count);
          expect(firstDifference(wasm, js)).toBe(-1);
        },
      ),
      { numRuns: 120 },
    );
  });

  it('agrees through the ziggurat slow path and its tail: a long stream of many members', () => {
    // 40 × 32 768 draws: ~36 000 slow-path draws, ~750 of them in the tail beyond R.
    const n = 8 * CHUNK;
    let tails = 0;
    for (let member = 0; member < 40; member++) {
      const k = { runSeed: 77, iteration: 3, member };
      const js = new Float32Array(n);
      const wasm = new Float32Array(n);
      applyNoiseWith('js', js, k, 1, 0, 0, n);
      applyNoiseWith('wasm', wasm, k, 1, 0, 0, n);
      expect(firstDifference(wasm, js)).toBe(-1);
      for (const x of js) if (Math.abs(x) > 3.442619855899) tails++;
    }
    expect(tails).toBeGreaterThan(300);
  });

  it("decides the slow path's lhs < Math.exp(y) exactly, also within an ulp of the boundary", () => {
    const zeros = new Float64Array(128);
    const kernel = WasmNoiseKernel.create({ W: zeros, X: zeros, F: zeros, seedChunk: () => {} });
    if (!kernel) throw new Error('no WebAssembly kernel');
    const bits = new Float64Array(1);
    const words = new BigInt64Array(bits.buffer);
    const ulpStep = (x: number, d: number) => {
      bits[0] = x;
      words[0] += BigInt(d);
      return bits[0];
    };
    fc.assert(
      fc.property(fc.double({ min: -6, max: 0, noNaN: true }), (y) => {
        const e = Math.exp(y);
        for (const lhs of [e, ulpStep(e, -1), ulpStep(e, 1), ulpStep(e, -3), e * (1 - 1e-12), e * (1 + 1e-12), e * (1 - 1e-8), e * (1 + 1e-8), e - 1e-3, e + 1e-3]) {
          expect(kernel.acceptsBelowExp(lhs, y)).toBe(lhs < e);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('serves applyNoise and fillNoise, the stream unchanged (same as the JS kernel, Float32 and Float64)', () => {
    const k = { runSeed: 5, iteration: 1, member: 2 };
    const n = 3 * CHUNK + 11;
    const viaApi = new Float32Array(n).fill(0.5);
    applyNoise(viaApi, k, -0.25, 1000, 7, n - 3);
    const viaJs = new Float32Array(n).fill(0.5);
    applyNoiseWith('js', viaJs, k, -0.25, 1007, 7, n - 10);
    expect(firstDifference(viaApi, viaJs)).toBe(-1);
    const filled = new Float64Array(n).fill(Number.NaN);
    fillNoise(filled, k, 99);
    const expected = new Float64Array(n);
    applyNoiseWith('js', expected, k, 1, 99, 0, n);
    expect(firstDifference(filled, expected)).toBe(-1);
  });

  it('rejects a destination outside the array, with either kernel', () => {
    for (const kernel of ['js', 'wasm'] as const) {
      expect(() => applyNoiseWith(kernel, new Float32Array(8), { runSeed: 1, iteration: 0, member: 0 }, 1, 0, 4, 5)).toThrow(/outside an array of length 8/);
    }
  });
});

describe('WebAssembly assembler', () => {
  it('encodes signed constants, locals, loops and calls that the engine runs as written', () => {
    const m = new ModuleBuilder();
    const square = m.func('square', [['x', 'i32']], ['i32']);
    square.get('x', 'x').op('i32.mul');
    // sum of squares of k for k in [from, to), plus a large negative constant (multi-byte signed LEB128).
    const f = m.func('sumSquares', [['from', 'i32'], ['to', 'i32']], ['i32'], { export: true });
    f.local('acc', 'i32');
    f.i32(-1_000_000).set('acc');
    f.block('done').loop('next');
    f.get('from', 'to').op('i32.ge_s').brIf('done');
    f.get('acc', 'from').call('square').op('i32.add').set('acc');
    f.get('from').i32(1).op('i32.add').set('from');
    f.br('next');
    f.end().end();
    f.get('acc');
    const bytes = m.encode();
    const wasm = webAssembly;
    if (!wasm) throw new Error('no WebAssembly in this Node');
    expect(wasm.validate(bytes)).toBe(true);
    const { sumSquares } = new wasm.Instance(new wasm.Module(bytes)).exports as { sumSquares: (a: number, b: number) => number };
    expect(sumSquares(3, 200)).toBe(-1_000_000 + (199 * 200 * 399) / 6 - 5);
  });

  it('refuses unbalanced blocks and unknown names instead of emitting a broken module', () => {
    const m = new ModuleBuilder();
    const f = m.func('f', [], []);
    expect(() => f.get('nope')).toThrow(/unknown local nope/);
    expect(() => f.br('outer')).toThrow(/no enclosing block outer/);
    f.block('open');
    expect(() => m.encode()).toThrow(/unclosed blocks: open/);
  });
});
