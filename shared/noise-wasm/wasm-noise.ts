/**
 * Runs the WebAssembly noise kernel (kernel.ts) behind the same contract as the JavaScript kernel in
 * shared/noise.ts: out[dest + k] += c·ε[pos + k], for float32 and float64 targets, bit-identical.
 *
 * The stream's definition (ziggurat tables, chunk seeding) is passed in by shared/noise.ts, so this
 * folder does not import it back. θ lives outside wasm memory, so each group of up to four chunks is
 * copied in, updated there and copied back (two memcpys, cheaper than a JavaScript add loop).
 */
import { buildNoiseKernel, CHUNK_ELEMENTS, EXP2_COUNT, LANES, LAYOUT } from './kernel.ts';
import { webAssembly } from './webassembly-api.ts';

export interface ZigguratDefinition {
  /** Per layer: width W[i] (value = j·W[i]), acceptance threshold X[i] (fast path iff |j·W[i]| < X[i]), F[i] = f(x_i). */
  W: Float64Array;
  X: Float64Array;
  F: Float64Array;
  /** Writes the xoshiro128** state (s0..s3) that starts `chunk` of the stream of `key`. */
  seedChunk(key: NoiseKeyLike, chunk: number, state: Int32Array): void;
}

export interface NoiseKeyLike {
  runSeed: number;
  iteration: number;
  member: number;
}

interface KernelExports {
  memory: { buffer: ArrayBuffer };
  gen(n: number): void;
  apply32(block: number, eps: number, len: number, c: number): void;
  apply64(block: number, eps: number, len: number, c: number): void;
  perturbExact32(block: number, eps: number, len: number, c: number, base: number): number;
  acceptTest(lhs: number, y: number): number;
}

/** The least m ≥ 0 with fl(m·w) ≥ x: |j| < KT ⟺ fl(|j|·w) < x, since fl(m·w) is non-decreasing in m. */
function integerThreshold(w: number, x: number): number {
  let lo = 0;
  let hi = 2 ** 25;
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2);
    if (mid * w >= x) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/**
 * Receives the elements whose θ the exact perturbation could not make round-trip, a block at a time:
 * indices into `out` (ascending), their values before, and what the restore rule fl32(t − c·ε) gives
 * there instead. The arrays are views into kernel memory or scratch: copy them.
 */
export interface FixupSink {
  append(index: Int32Array, before: Float32Array, restored: Float32Array): void;
}

/** Elements an exact perturbation saved, read once in ascending index order. */
export interface SavedElements {
  /** Index into θ of the next saved element; Infinity when none is left. */
  readonly index: number;
  /** θ before the perturbation at `index`, given the value the restore rule computed there; moves on. */
  take(restored: number): number;
}

export class WasmNoiseKernel {
  private readonly i32: Int32Array;
  private readonly f32: Float32Array;
  private readonly f64: Float64Array;
  private readonly laneState = new Int32Array(4);
  /** fl32(t − c·ε) at a block's fix-ups: what a restore computes there before writing θ back. */
  private readonly restoredScratch = new Float32Array(LANES * CHUNK_ELEMENTS);

  private constructor(
    private readonly kernel: KernelExports,
    private readonly zig: ZigguratDefinition,
  ) {
    const buffer = kernel.memory.buffer;
    this.i32 = new Int32Array(buffer);
    this.f32 = new Float32Array(buffer);
    this.f64 = new Float64Array(buffer);
    const stride = LAYOUT.zigStride;
    for (let i = 0; i < zig.W.length; i++) {
      const at = LAYOUT.zig + i * stride;
      this.f64[at / 8] = zig.W[i];
      this.i32[(at + 8) / 4] = integerThreshold(zig.W[i], zig.X[i]);
      this.f64[(at + 16) / 8] = zig.F[i];
      this.f64[(at + 24) / 8] = i > 0 ? zig.F[i - 1] : Number.NaN; // layer 0 never reads F[−1]: it takes the tail
    }
    for (let m = 0; m < EXP2_COUNT; m++) this.f64[LAYOUT.exp2 / 8 + m] = 2 ** (-m / 32);
  }

  /** The kernel, or null where WebAssembly SIMD is unavailable. */
  static create(zig: ZigguratDefinition): WasmNoiseKernel | null {
    const wasm = webAssembly;
    if (!wasm) return null;
    const bytes = buildNoiseKernel();
    // SIMD128 is part of the validated feature set: an engine without it rejects the module here.
    if (!wasm.validate(bytes)) return null;
    const instance = new wasm.Instance(new wasm.Module(bytes), { math: { exp: Math.exp, log: Math.log } });
    return new WasmNoiseKernel(instance.exports as unknown as KernelExports, zig);
  }

  /** out[dest + k] += c·ε_key[pos + k] for k < count. */
  apply(key: NoiseKeyLike, pos: number, count: number, out: Float32Array | Float64Array, dest: number, c: number): void {
    const wide = out instanceof Float64Array;
    const mem = wide ? this.f64 : this.f32;
    const block = LAYOUT.block / (wide ? 8 : 4);
    this.eachSpan(key, pos, count, dest, (eps, len, at) => {
      mem.set(out.subarray(at, at + len), block);
      if (wide) this.kernel.apply64(LAYOUT.block, eps, len, c);
      else this.kernel.apply32(LAYOUT.block, eps, len, c);
      out.set(mem.subarray(block, block + len), at);
    });
  }

  /**
   * out[dest + k] ← t next to out[dest + k] + c·ε_key[pos + k] that restores exactly (kernel.ts,
   * perturbExact32); elements with no such t go to `fixups` with their value before.
   */
  perturbExact(key: NoiseKeyLike, pos: number, count: number, out: Float32Array, dest: number, c: number, fixups: FixupSink): void {
    const block = LAYOUT.block / 4;
    this.eachSpan(key, pos, count, dest, (eps, len, at) => {
      this.f32.set(out.subarray(at, at + len), block);
      const n = this.kernel.perturbExact32(LAYOUT.block, eps, len, c, at);
      out.set(this.f32.subarray(block, block + len), at);
      this.reportFixups(n, eps, at, c, fixups);
    });
  }

  /** Hands the block's n fix-ups to `fixups`, with t + (−c)·ε at each formed as apply32 forms it (f64, one rounding). */
  private reportFixups(n: number, eps: number, at: number, c: number, fixups: FixupSink): void {
    if (n === 0) return;
    const index = this.i32.subarray(LAYOUT.fixupIndex / 4, LAYOUT.fixupIndex / 4 + n);
    const block = LAYOUT.block / 4;
    for (let j = 0; j < n; j++) {
      const k = index[j] - at;
      this.restoredScratch[j] = this.f32[block + k] + -c * this.f32[eps / 4 + k];
    }
    fixups.append(index, this.f32.subarray(LAYOUT.fixupValue / 4, LAYOUT.fixupValue / 4 + n), this.restoredScratch.subarray(0, n));
  }

  /**
   * One perturbation of out[dest, dest + count) replaced by another on the same ε (an antithetic pair:
   * c·ε → −c·ε), generating ε once instead of twice: per span, the restore of the first (t ← fl(t −
   * cFrom·ε), then the elements it saved, `saved` sorted by index) and then perturbExact with cTo. Bit
   * for bit `apply(−cFrom)`, the saved values written back, then `perturbExact(cTo)`.
   */
  switchExact(key: NoiseKeyLike, pos: number, count: number, out: Float32Array, dest: number, cFrom: number, saved: SavedElements, cTo: number, fixups: FixupSink): void {
    const block = LAYOUT.block / 4;
    while (saved.index < dest) saved.take(0);
    this.eachSpan(key, pos, count, dest, (eps, len, at) => {
      this.f32.set(out.subarray(at, at + len), block);
      this.kernel.apply32(LAYOUT.block, eps, len, -cFrom);
      while (saved.index < at + len) {
        const k = block + saved.index - at;
        this.f32[k] = saved.take(this.f32[k]);
      }
      const n = this.kernel.perturbExact32(LAYOUT.block, eps, len, cTo, at);
      out.set(this.f32.subarray(block, block + len), at);
      this.reportFixups(n, eps, at, cTo, fixups);
    });
  }

  /**
   * Walks ε_key[pos, pos + count) up to LANES chunks at a time: seeds the lanes, generates, and hands
   * `span` the byte offset of this span's ε in kernel memory, its length and where it lands in the output.
   */
  private eachSpan(key: NoiseKeyLike, pos: number, count: number, dest: number, span: (eps: number, len: number, at: number) => void): void {
    const start = pos;
    const end = pos + count;
    while (pos < end) {
      const first = Math.floor(pos / CHUNK_ELEMENTS);
      const last = Math.min(first + LANES, Math.ceil(end / CHUNK_ELEMENTS));
      this.seed(key, first, last - first);
      const stop = Math.min(end, last * CHUNK_ELEMENTS);
      // One chunk: generate only up to where it is needed; several: every lane but the last is needed whole.
      this.kernel.gen(last - first === 1 ? stop - first * CHUNK_ELEMENTS : CHUNK_ELEMENTS);
      span(LAYOUT.eps + (pos - first * CHUNK_ELEMENTS) * 4, stop - pos, dest + (pos - start));
      pos = stop;
    }
  }

  /** The slow path's decision lhs < Math.exp(y) (y ≤ 0), as the kernel makes it: for tests. */
  acceptsBelowExp(lhs: number, y: number): boolean {
    return this.kernel.acceptTest(lhs, y) === 1;
  }

  /** Lane l starts chunk first + l; lanes past `used` repeat lane 0 (their output is not read). */
  private seed(key: NoiseKeyLike, first: number, used: number): void {
    const s = this.laneState;
    const base = LAYOUT.state / 4;
    for (let l = 0; l < LANES; l++) {
      if (l < used) this.zig.seedChunk(key, first + l, s);
      for (let k = 0; k < 4; k++) this.i32[base + 4 * k + l] = s[k];
    }
  }
}
