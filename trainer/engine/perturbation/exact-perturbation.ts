/**
 * Full mode's perturb/restore, bit-exact. Plain θ += δ then θ −= δ in float32 leaves up to one rounding
 * error per cycle, and over many members those random-walk past 1e-6·RMS(θ). Here perturbing chooses, for
 * each element, a float32 t next to θ+δ that the restore rule fl32(t − δ) maps back to θ exactly (RN(θ+δ)
 * or one of its neighbours, which changes the perturbation by at most one ulp of t). When no such t exists
 * (t lands in a higher binade than θ and its coarser grid skips θ), the element's θ is saved in a small
 * sparse list and written back on restore. So restore is exact for every element, every cycle; the extra
 * memory is the sparse list, measured as `fixupFraction`, stored compactly (fixup-list.ts).
 */
import type { ParameterSegment } from '../../../shared/es.ts';
import { activeNoiseKernel, applyNoise, isDeviceKey, perturbExactWasm, switchExactWasm, type NoiseKernelName, type NoiseKey } from '../../../shared/noise.ts';
import { FixupReader, FixupWriter, type FixupList } from './fixup-list.ts';
import { forEachNoiseWindow } from './noise-windows.ts';

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** The float32 after x (toward +∞ when up), for finite x. */
function nextFloat(x: number, up: boolean): number {
  f32[0] = x;
  if (x === 0) {
    u32[0] = up ? 1 : 0x80000001;
    return f32[0];
  }
  if (x > 0 === up) u32[0]++;
  else u32[0]--;
  return f32[0];
}

/** θ[i] ← t next to θ[i] + d that fl32(t − d) maps back to θ[i]; θ[i] saved in `list` when none does. */
function perturbElement(theta: Float32Array, i: number, d: number, list: FixupWriter): void {
  const x = theta[i];
  let t = Math.fround(x + d);
  if (Math.fround(t - d) !== x) {
    const up = nextFloat(t, true);
    const down = nextFloat(t, false);
    if (Math.fround(up - d) === x) t = up;
    else if (Math.fround(down - d) === x) t = down;
    else list.push(i, x, Math.fround(t - d));
  }
  theta[i] = t;
}

export interface Perturbation {
  key: NoiseKey;
  c: number;
  /** Per segment: the elements whose θ could not round-trip, compactly (fixup-list.ts). */
  fixups: FixupList[];
  fixupCount: number;
}

/** θ ← θ + c·ε_key (rounded so it can be undone exactly); returns what `restore` needs. */
export function perturb(segments: readonly ParameterSegment[], key: NoiseKey, c: number): Perturbation {
  return perturbWith(activeNoiseKernel, segments, key, c);
}

/**
 * `perturb` with the named noise kernel: 'wasm' runs the rule below inside the WebAssembly kernel
 * (shared/noise-wasm/kernel.ts, the faster one: docs/BENCHMARKS.md), 'js' is the reference; the two agree
 * bit for bit (test/engine/full-mode.test.ts).
 */
export function perturbWith(kernel: NoiseKernelName, segments: readonly ParameterSegment[], key: NoiseKey, c: number): Perturbation {
  const lists = segments.map(() => new FixupWriter());
  // the wasm kernel makes only esopt-noise: a device-noise key takes the JavaScript rule, the same bits
  if (kernel === 'wasm' && !isDeviceKey(key)) segments.forEach((s, si) => perturbExactWasm(s.data, key, c, s.offset, 0, s.data.length, lists[si]));
  else forEachNoiseWindow(segments, key, (si, from, eps, epsFrom, count) => {
    for (let k = 0; k < count; k++) perturbElement(segments[si].data, from + k, c * eps[epsFrom + k], lists[si]);
  });
  return perturbationOf(key, c, lists);
}

function perturbationOf(key: NoiseKey, c: number, lists: FixupWriter[]): Perturbation {
  const fixups = lists.map((l) => l.finish());
  return { key, c, fixups, fixupCount: fixups.reduce((a, f) => a + f.count, 0) };
}

/**
 * θ perturbed by `from` becomes θ perturbed by c on the same noise (`from`'s antithetic partner, c =
 * −from.c), in one generation of ε where `restore` then `perturb` would take two: bit for bit the same θ
 * and fix-ups as those two calls. Serving a pair of antithetic members back to back then costs three
 * passes over θ instead of four.
 */
export function switchPerturbation(segments: readonly ParameterSegment[], from: Perturbation, c: number): Perturbation {
  return switchPerturbationWith(activeNoiseKernel, segments, from, c);
}

/** `switchPerturbation` with the named noise kernel ('js' is the reference; tests cross-check the two). */
export function switchPerturbationWith(kernel: NoiseKernelName, segments: readonly ParameterSegment[], from: Perturbation, c: number): Perturbation {
  const lists = segments.map(() => new FixupWriter());
  if (kernel === 'wasm' && !isDeviceKey(from.key)) segments.forEach((s, si) => switchExactWasm(s.data, from.key, s.offset, from.c, new FixupReader(from.fixups[si]), c, lists[si]));
  else {
    const saved = from.fixups.map((f) => new FixupReader(f)); // per segment: the next saved element to write back
    forEachNoiseWindow(segments, from.key, (si, start, eps, epsFrom, count) => {
      const theta = segments[si].data;
      for (let k = 0; k < count; k++) {
        const i = start + k;
        // restore's two steps on this element (fl32(t + (−c)·ε), as applyNoise computes it; then its saved θ) …
        theta[i] = Math.fround(theta[i] + -from.c * eps[epsFrom + k]);
        if (saved[si].index === i) theta[i] = saved[si].take(theta[i]);
        // … then perturb's
        perturbElement(theta, i, c * eps[epsFrom + k], lists[si]);
      }
    });
  }
  return perturbationOf(from.key, c, lists);
}

/** Undo `perturb` exactly: θ ← fl32(t − c·ε), then the saved elements. */
export function restore(segments: readonly ParameterSegment[], p: Perturbation): void {
  // fl32(t + (−c)·ε) is fl32(t − c·ε) bit for bit (negation is exact), which is what applyNoise computes.
  for (const s of segments) applyNoise(s.data, p.key, -p.c, s.offset);
  segments.forEach((s, si) => {
    for (const r = new FixupReader(p.fixups[si]); r.index !== Infinity; ) s.data[r.index] = r.take(s.data[r.index]);
  });
}
