/**
 * The noise kernel as WebAssembly (SIMD128), emitted with ./wasm-assembler.ts at load time. One file past
 * 300 lines because the emitted instruction sequence must be read in order against shared/noise.ts.
 *
 * Exactness is the design constraint: every value is produced by the same IEEE operations, in the same
 * order, as the JavaScript kernel in shared/noise.ts, so the two agree bit for bit.
 *
 * Vectorisation is across stream chunks, not within one: each chunk has its own xoshiro128** state,
 * so four consecutive chunks run in the four i32x4 lanes and every lane produces exactly the sequential
 * stream of its chunk. Per step all lanes draw one xoshiro output and try the ziggurat's fast path;
 * a lane that misses it (≈2.8 % of draws) is finished by the scalar slow path (`slowLane`) on that lane's
 * own state, in stream order, before the step's values are stored. `gen` writes ε (float32) lane-major,
 * so the four chunks lie back to back in EPS, exactly as consecutive stream positions; `apply32` /
 * `apply64` then do the contiguous θ += c·ε in f64x2 with one rounding to the target's type.
 *
 * Two exactness details:
 * - The fast-path test |j·W| < X is done on integers, |j| < KT, where KT[i] is the least m with
 *   fl(m·W[i]) ≥ X[i] (derived from the float tables in wasm-noise.ts). fl(m·W) is monotone in m and
 *   sign-symmetric, so the two tests accept exactly the same j.
 * - The slow path's accept test `lhs < exp(y)` uses a fast exp with relative error < 1e-14 and calls
 *   the imported Math.exp only when lhs is within 2^-30 of it, so every decision equals the one made
 *   with Math.exp. The tail (layer 0) uses the imported Math.log itself.
 */
import { type FunctionBuilder, ModuleBuilder } from './wasm-assembler.ts';

export const LANES = 4;
export const CHUNK_ELEMENTS = 4096;
/** Steps per loop iteration of gen; a request for n positions may fill up to UNROLL − 1 more (in-lane). */
const UNROLL = 2;

/** Byte layout of the kernel's memory. */
export const LAYOUT = {
  /** 128 ziggurat layers × 32 bytes: W (f64), KT (i32), pad, F[i] (f64), F[i-1] (f64). */
  zig: 0,
  zigStride: 32,
  /** 2^(-m/32) for m < EXP2_COUNT (f64). */
  exp2: 4096,
  /** Lane-major xoshiro state: s0 of the four lanes, then s1, s2, s3 (i32x4 each). */
  state: 8192,
  /** Where gen spills the step's j (i32x4) and layer byte offsets (i32x4) for the slow path. */
  spillJ: 8256,
  spillLayer: 8272,
  /** ε of the four lanes' chunks, back to back (f32). */
  eps: 16384,
  /** θ block the apply functions update in place (up to LANES chunks of f64). */
  block: 16384 + LANES * CHUNK_ELEMENTS * 4,
  /** perturbExact32's fix-ups, up to one per element of a block: indices (i32), then saved θ (f32). */
  fixupIndex: 16384 + LANES * CHUNK_ELEMENTS * 4 + LANES * CHUNK_ELEMENTS * 8,
  fixupValue: 16384 + LANES * CHUNK_ELEMENTS * 4 + LANES * CHUNK_ELEMENTS * 12,
  pages: 6,
} as const;

export const EXP2_COUNT = 320;
const TAIL_R = 3.442619855899;

/** xoshiro128** on the scalar state x0..x3: the output into `u`, exactly ChunkStream.next(). */
function emitNext(f: FunctionBuilder): void {
  // result = rotl(s1·5, 7)·9, then the state step; exactly ChunkStream.next().
  f.get('x1').i32(5).op('i32.mul').i32(7).op('i32.rotl').i32(9).op('i32.mul').set('u');
  f.get('x1').i32(9).op('i32.shl').set('t');
  f.get('x2', 'x0').op('i32.xor').set('x2');
  f.get('x3', 'x1').op('i32.xor').set('x3');
  f.get('x1', 'x2').op('i32.xor').set('x1');
  f.get('x0', 'x3').op('i32.xor').set('x0');
  f.get('x2', 't').op('i32.xor').set('x2');
  f.get('x3').i32(11).op('i32.rotl').set('x3');
}

/** ChunkStream.uniform() on the stack: (next() >>> 0)·2^-32 + 2^-33. */
function emitUniform(f: FunctionBuilder): void {
  emitNext(f);
  f.get('u').op('f64.convert_i32_u').f64(2.3283064365386963e-10).op('f64.mul').f64(1.1641532182693481e-10).op('f64.add');
}

/** Leaves (lhs < Math.exp(y)) on the stack, deciding with the fast exp wherever that is certain. */
function emitAcceptTest(f: FunctionBuilder): void {
  f.get('y').f64(-32 / Math.LN2).op('f64.mul', 'f64.nearest').tee('mf').f64(EXP2_COUNT - 1).op('f64.le');
  f.if('inTable', 'i32');
  {
    // y = −m·ln2/32 + r with |r| ≤ ln2/64; exp(r) by its degree-5 Taylor polynomial (error < 3e-15).
    f.get('y').get('mf').f64(Math.LN2 / 32).op('f64.mul', 'f64.add').set('r');
    f.f64(1 / 120).get('r').op('f64.mul').f64(1 / 24).op('f64.add');
    f.get('r').op('f64.mul').f64(1 / 6).op('f64.add');
    f.get('r').op('f64.mul').f64(1 / 2).op('f64.add');
    f.get('r').op('f64.mul').f64(1).op('f64.add');
    f.get('r').op('f64.mul').f64(1).op('f64.add');
    f.get('mf').op('i32.trunc_f64_s').i32(3).op('i32.shl').mem('f64.load', LAYOUT.exp2).op('f64.mul').set('e');
    f.get('lhs', 'e').op('f64.sub').tee('d').op('f64.abs').get('e').f64(2 ** -30).op('f64.mul', 'f64.gt');
    f.if('certain', 'i32');
    f.get('d').f64(0).op('f64.lt');
    f.else();
    f.get('lhs', 'y').call('exp').op('f64.lt');
    f.end();
  }
  f.else();
  f.get('lhs', 'y').call('exp').op('f64.lt');
  f.end();
}

/**
 * slowLane(lane, i): the draw of `lane` at byte offset i of its chunk missed the fast path; finish it
 * with the ziggurat's slow path — a port of ChunkStream.normalTail, same operations in the same order —
 * on that lane's xoshiro state (spilled by gen), write ε into EPS and the advanced state back.
 */
function emitSlowLane(m: ModuleBuilder): void {
  const f = m.func('slowLane', [['lane', 'i32'], ['i', 'i32']], []);
  for (const l of ['x0', 'x1', 'x2', 'x3', 'lo', 'j', 'u', 't']) f.local(l, 'i32');
  for (const l of ['x', 'xt', 'y', 'lhs', 'mf', 'r', 'e', 'd']) f.local(l, 'f64');
  for (let k = 0; k < 4; k++) f.get('lane').mem('i32.load', LAYOUT.state + 16 * k).set(`x${k}`);
  f.get('lane').mem('i32.load', LAYOUT.spillLayer).set('lo');
  f.get('lane').mem('i32.load', LAYOUT.spillJ).set('j');
  // EPS address of this draw: lane l's chunk starts at l·CHUNK_ELEMENTS·4 bytes.
  f.get('lane').i32(Math.log2(CHUNK_ELEMENTS)).op('i32.shl').get('i').op('i32.add');
  f.block('result', 'f64').loop('retry');
  // Layer 0: the tail beyond R, by Marsaglia's exponential method.
  f.get('lo').op('i32.eqz').if('tail');
  f.loop('tailLoop');
  emitUniform(f);
  f.call('log').op('f64.neg').f64(TAIL_R).op('f64.div').set('xt');
  emitUniform(f);
  f.call('log').op('f64.neg').set('y');
  f.get('y', 'y').op('f64.add').get('xt', 'xt').op('f64.mul', 'f64.lt').brIf('tailLoop');
  f.end();
  f.get('j').i32(0).op('i32.gt_s').if('sign', 'f64');
  f.f64(TAIL_R).get('xt').op('f64.add');
  f.else();
  f.f64(-TAIL_R).get('xt').op('f64.sub');
  f.end();
  f.br('result');
  f.end();
  // Wedge of layer i: accept x with probability (f(x) − F[i]) / (F[i−1] − F[i]).
  f.get('j').op('f64.convert_i32_s').get('lo').mem('f64.load', LAYOUT.zig).op('f64.mul').set('x');
  f.get('lo').mem('f64.load', LAYOUT.zig + 16);
  emitUniform(f);
  f.get('lo').mem('f64.load', LAYOUT.zig + 24).get('lo').mem('f64.load', LAYOUT.zig + 16).op('f64.sub', 'f64.mul', 'f64.add').set('lhs');
  f.f64(-0.5).get('x').op('f64.mul').get('x').op('f64.mul').set('y');
  emitAcceptTest(f);
  f.if('accepted');
  f.get('x').br('result');
  f.end();
  // A fresh draw, which may take the fast path.
  emitNext(f);
  f.get('u').i32(127).op('i32.and').i32(5).op('i32.shl').set('lo');
  f.get('u').i32(7).op('i32.shr_s').set('j');
  f.get('j').op('f64.convert_i32_s').get('lo').mem('f64.load', LAYOUT.zig).op('f64.mul').set('x');
  f.get('j', 'j').i32(31).op('i32.shr_s', 'i32.xor').get('j').i32(31).op('i32.shr_s', 'i32.sub'); // |j|
  f.get('lo').mem('i32.load', LAYOUT.zig + 8).op('i32.lt_s');
  f.if('fast');
  f.get('x').br('result');
  f.end();
  f.br('retry');
  f.end();
  f.op('unreachable');
  f.end();
  f.op('f32.demote_f64').mem('f32.store', LAYOUT.eps);
  for (let k = 0; k < 4; k++) f.get('lane', `x${k}`).mem('i32.store', LAYOUT.state + 16 * k);
}

/** acceptTest(lhs, y) → lhs < Math.exp(y) as the slow path decides it (exported so tests can probe it). */
function emitAcceptTestExport(m: ModuleBuilder): void {
  const f = m.func('acceptTest', [['lhs', 'f64'], ['y', 'f64']], ['i32'], { export: true });
  for (const l of ['mf', 'r', 'e', 'd']) f.local(l, 'f64');
  emitAcceptTest(f);
}

/** gen(n): positions [0, n) of the four lanes' chunks into EPS, from the seeded lane state. */
function emitGen(m: ModuleBuilder): void {
  const f = m.func('gen', [['n', 'i32']], [], { export: true });
  for (const l of ['s0', 's1', 's2', 's3', 'u', 't', 'j', 'idx', 'k', 'w01', 'w23', 'eps', 'fast']) f.local(l, 'v128');
  for (const l of ['i', 'end', 'a0', 'a1', 'a2', 'a3', 'slowMask', 'lane']) f.local(l, 'i32');
  f.local('laneMask', 'v128');
  const S = LAYOUT.state;
  const loadState = () => {
    for (let k = 0; k < 4; k++) f.i32(0).mem('v128.load', S + 16 * k).set(`s${k}`);
  };
  loadState();
  f.get('n').i32(2).op('i32.shl').set('end');
  f.block('done');
  f.get('end').op('i32.eqz').brIf('done');
  f.loop('step');
  for (let unroll = 0; unroll < UNROLL; unroll++) {
    // u = rotl(s1·5, 7)·9 in each lane (·5 and ·9 as shift-adds).
    f.get('s1', 's1').i32(2).op('i32x4.shl', 'i32x4.add').tee('t').i32(7).op('i32x4.shl').get('t').i32(25).op('i32x4.shr_u', 'v128.or');
    f.tee('t').get('t').i32(3).op('i32x4.shl', 'i32x4.add').set('u');
    f.get('s1').i32(9).op('i32x4.shl').set('t');
    f.get('s2', 's0').op('v128.xor').set('s2');
    f.get('s3', 's1').op('v128.xor').set('s3');
    f.get('s1', 's2').op('v128.xor').set('s1');
    f.get('s0', 's3').op('v128.xor').set('s0');
    f.get('s2', 't').op('v128.xor').set('s2');
    f.get('s3').i32(11).op('i32x4.shl').get('s3').i32(21).op('i32x4.shr_u', 'v128.or').set('s3');
    // Ziggurat fast path: layer = u & 127, j = u >> 7 (signed), accept |j| < KT[layer].
    f.get('u').i32(7).op('i32x4.shr_s').set('j');
    f.get('u').i32x4(127, 127, 127, 127).op('v128.and').i32(5).op('i32x4.shl').set('idx');
    for (let l = 0; l < 4; l++) f.get('idx').lane('i32x4.extract_lane', l).set(`a${l}`);
    f.get('idx').set('k');
    for (let l = 0; l < 4; l++) f.get(`a${l}`, 'k').memLane('v128.load32_lane', LAYOUT.zig + 8, l).set('k');
    f.get('j').op('i32x4.abs').get('k').op('i32x4.lt_s').set('fast');
    f.get('a0', 'j').memLane('v128.load64_lane', LAYOUT.zig, 0).set('w01');
    f.get('a1', 'w01').memLane('v128.load64_lane', LAYOUT.zig, 1).set('w01');
    f.get('a2', 'j').memLane('v128.load64_lane', LAYOUT.zig, 0).set('w23');
    f.get('a3', 'w23').memLane('v128.load64_lane', LAYOUT.zig, 1).set('w23');
    // ε = fround(j·W) in f64x2 halves.
    const HIGH_HALF = [8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15];
    const JOIN_LOW_HALVES = [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23];
    f.get('j').op('f64x2.convert_low_i32x4_s').get('w01').op('f64x2.mul', 'f32x4.demote_f64x2_zero');
    f.get('j', 'j').shuffle(HIGH_HALF).op('f64x2.convert_low_i32x4_s').get('w23').op('f64x2.mul', 'f32x4.demote_f64x2_zero');
    f.shuffle(JOIN_LOW_HALVES).set('eps');
    for (let l = 0; l < 4; l++) f.get('i', 'eps').memLane('v128.store32_lane', LAYOUT.eps + l * CHUNK_ELEMENTS * 4 + 4 * unroll, l);
    // Lanes that missed the fast path (≈2.8 % per lane), each finished in lane order on its own state.
    // Their new state comes back through 4-byte slots and is blended in (splat + bitselect), which keeps
    // store-to-load forwarding intact where reloading whole vectors over 4-byte stores would stall.
    f.get('fast').op('i32x4.bitmask').i32(15).op('i32.xor').tee('slowMask');
    f.if('someSlow');
    for (let k = 0; k < 4; k++) f.i32(0).get(`s${k}`).mem('v128.store', S + 16 * k);
    f.i32(0).get('j').mem('v128.store', LAYOUT.spillJ);
    f.i32(0).get('idx').mem('v128.store', LAYOUT.spillLayer);
    f.loop('slowLanes');
    f.get('slowMask').op('i32.ctz').i32(2).op('i32.shl').tee('lane').get('i').i32(4 * unroll).op('i32.add').call('slowLane');
    f.i32x4(0, 4, 8, 12).get('lane').op('i32x4.splat', 'i32x4.eq').set('laneMask');
    for (let k = 0; k < 4; k++) f.get('lane').mem('v128.load32_splat', S + 16 * k).get(`s${k}`, 'laneMask').op('v128.bitselect').set(`s${k}`);
    f.get('slowMask', 'slowMask').i32(1).op('i32.sub', 'i32.and').tee('slowMask').brIf('slowLanes');
    f.end();
    f.end();
  }
  f.get('i').i32(4 * UNROLL).op('i32.add').tee('i').get('end').op('i32.lt_u').brIf('step');
  f.end();
  f.end();
}

/**
 * apply32 / apply64(block, eps, len, c): θ[k] ← θ[k] + c·ε[k] for k < len, θ at byte address `block`
 * (float32 or float64), ε at `eps` (float32); the sum is formed in f64 and rounded once to θ's type.
 */
function emitApply(m: ModuleBuilder, target: 'f32' | 'f64'): void {
  const f = m.func(target === 'f32' ? 'apply32' : 'apply64', [['block', 'i32'], ['eps', 'i32'], ['len', 'i32'], ['c', 'f64']], [], { export: true });
  f.local('k', 'i32').local('vecEnd', 'i32').local('e', 'v128').local('th', 'v128').local('cv', 'v128');
  const HIGH_HALF = [8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15];
  const JOIN_LOW_HALVES = [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23];
  const thetaAddress = () => {
    f.get('block', 'k').i32(target === 'f32' ? 2 : 3).op('i32.shl', 'i32.add');
  };
  f.get('c').op('f64x2.splat').set('cv');
  f.get('len').i32(-4).op('i32.and').set('vecEnd');
  f.block('vecDone');
  f.get('vecEnd').op('i32.eqz').brIf('vecDone');
  f.loop('vec');
  f.get('eps', 'k').i32(2).op('i32.shl', 'i32.add').mem('v128.load').set('e');
  if (target === 'f32') {
    thetaAddress();
    thetaAddress();
    f.mem('v128.load').set('th');
    f.get('th').op('f64x2.promote_low_f32x4').get('cv', 'e').op('f64x2.promote_low_f32x4', 'f64x2.mul', 'f64x2.add', 'f32x4.demote_f64x2_zero');
    f.get('th', 'th').shuffle(HIGH_HALF).op('f64x2.promote_low_f32x4');
    f.get('cv', 'e', 'e').shuffle(HIGH_HALF).op('f64x2.promote_low_f32x4', 'f64x2.mul', 'f64x2.add', 'f32x4.demote_f64x2_zero');
    f.shuffle(JOIN_LOW_HALVES).mem('v128.store');
  } else {
    thetaAddress();
    thetaAddress();
    f.mem('v128.load').get('cv', 'e').op('f64x2.promote_low_f32x4', 'f64x2.mul', 'f64x2.add').mem('v128.store');
    thetaAddress();
    thetaAddress();
    f.mem('v128.load', 16).get('cv', 'e', 'e').shuffle(HIGH_HALF).op('f64x2.promote_low_f32x4', 'f64x2.mul', 'f64x2.add').mem('v128.store', 16);
  }
  f.get('k').i32(4).op('i32.add').tee('k').get('vecEnd').op('i32.lt_u').brIf('vec');
  f.end();
  f.end();
  f.block('tailDone');
  f.loop('tail');
  f.get('k', 'len').op('i32.ge_u').brIf('tailDone');
  thetaAddress();
  thetaAddress();
  if (target === 'f32') f.mem('f32.load').op('f64.promote_f32');
  else f.mem('f64.load');
  f.get('c', 'eps', 'k').i32(2).op('i32.shl', 'i32.add').mem('f32.load').op('f64.promote_f32', 'f64.mul', 'f64.add');
  if (target === 'f32') f.op('f32.demote_f64').mem('f32.store');
  else f.mem('f64.store');
  f.get('k').i32(1).op('i32.add').set('k');
  f.br('tail');
  f.end();
  f.end();
}

/**
 * exactElement(at, d) → 1 if θ needs a fix-up: full mode's exact perturbation of one float32 θ at byte
 * address `at` by d = c·ε (f64), the same operations in the same order as the JavaScript reference in
 * trainer/engine/perturbation/exact-perturbation.ts: t = RN(θ + d), kept if fl32(t − d) = θ; else its upper, then
 * its lower float32 neighbour, whichever maps back to θ; else t, and the caller saves θ.
 */
function emitExactElement(m: ModuleBuilder): void {
  const f = m.func('exactElement', [['at', 'i32'], ['d', 'f64']], ['i32']);
  f.local('x', 'f64').local('t', 'f32').local('bits', 'i32').local('pos', 'i32').local('zero', 'i32').local('cand', 'f32');
  f.get('at').mem('f32.load').op('f64.promote_f32').set('x');
  f.get('x', 'd').op('f64.add', 'f32.demote_f64').set('t');
  const roundTrips = (v: string) => {
    f.get(v).op('f64.promote_f32').get('d').op('f64.sub', 'f32.demote_f64', 'f64.promote_f32').get('x').op('f64.eq');
  };
  const storeAndReturn = (v: string, r: number) => {
    f.get('at', v).mem('f32.store');
    f.i32(r).op('return');
  };
  roundTrips('t');
  f.if('nearest');
  storeAndReturn('t', 0);
  f.end();
  f.get('t').op('i32.reinterpret_f32').set('bits');
  f.get('t').op('f64.promote_f32').f64(0).op('f64.gt').set('pos');
  f.get('t').op('f64.promote_f32').f64(0).op('f64.eq').set('zero');
  // Toward +∞: the smallest positive subnormal from ±0, else one step away from 0 if t > 0, toward 0 if not.
  f.i32(1).get('bits').i32(1).op('i32.add').get('bits').i32(1).op('i32.sub').get('pos').op('select').get('zero').op('select');
  f.op('f32.reinterpret_i32').set('cand');
  roundTrips('cand');
  f.if('up');
  storeAndReturn('cand', 0);
  f.end();
  // Toward −∞: the smallest negative subnormal from ±0, else toward 0 if t > 0, away from 0 if not.
  f.i32(-0x7fffffff).get('bits').i32(1).op('i32.sub').get('bits').i32(1).op('i32.add').get('pos').op('select').get('zero').op('select');
  f.op('f32.reinterpret_i32').set('cand');
  roundTrips('cand');
  f.if('down');
  storeAndReturn('cand', 0);
  f.end();
  f.get('at', 't').mem('f32.store');
  f.i32(1);
}

/**
 * perturbExact32(block, eps, len, c, base) → fix-up count: exactElement over θ[k] (float32 at `block`) with
 * d = c·ε[k] for k < len. Four at a time in SIMD: where t = RN(θ + d) maps back to θ in all four lanes
 * (≈ 76 % of groups at σ = 1e-3), t is stored as is; otherwise the lanes that missed go through
 * exactElement and are blended with the rest. Elements that need a fix-up leave base + k at FIXUP_INDEX
 * and θ[k] before at FIXUP_VALUE, in order.
 */
function emitPerturbExact(m: ModuleBuilder): void {
  const f = m.func('perturbExact32', [['block', 'i32'], ['eps', 'i32'], ['len', 'i32'], ['c', 'f64'], ['base', 'i32']], ['i32'], { export: true });
  f.local('k', 'i32').local('vecEnd', 'i32').local('n', 'i32').local('l', 'i32').local('miss', 'i32').local('at', 'i32').local('x', 'f32');
  f.local('e', 'v128').local('th', 'v128').local('cv', 'v128').local('dlo', 'v128').local('dhi', 'v128').local('t', 'v128').local('ok', 'v128');
  const HIGH_HALF = [8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15];
  const JOIN_LOW_HALVES = [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23];
  /** exactElement on element `k + l` (locals), recording a fix-up. */
  const scalar = (index: () => void) => {
    f.get('block');
    index();
    f.i32(2).op('i32.shl', 'i32.add').tee('at').mem('f32.load').set('x');
    f.get('at', 'c', 'eps');
    index();
    f.i32(2).op('i32.shl', 'i32.add').mem('f32.load').op('f64.promote_f32', 'f64.mul').call('exactElement');
    f.if('fix');
    f.get('n').i32(2).op('i32.shl').get('base');
    index();
    f.op('i32.add').mem('i32.store', LAYOUT.fixupIndex);
    f.get('n').i32(2).op('i32.shl').get('x').mem('f32.store', LAYOUT.fixupValue);
    f.get('n').i32(1).op('i32.add').set('n');
    f.end();
  };
  f.get('c').op('f64x2.splat').set('cv');
  f.get('len').i32(-4).op('i32.and').set('vecEnd');
  f.block('vecDone');
  f.get('vecEnd').op('i32.eqz').brIf('vecDone');
  f.loop('vec');
  f.get('eps', 'k').i32(2).op('i32.shl', 'i32.add').mem('v128.load').set('e');
  f.get('block', 'k').i32(2).op('i32.shl', 'i32.add').mem('v128.load').set('th');
  f.get('cv', 'e').op('f64x2.promote_low_f32x4', 'f64x2.mul').set('dlo');
  f.get('cv', 'e', 'e').shuffle(HIGH_HALF).op('f64x2.promote_low_f32x4', 'f64x2.mul').set('dhi');
  f.get('th').op('f64x2.promote_low_f32x4').get('dlo').op('f64x2.add', 'f32x4.demote_f64x2_zero');
  f.get('th', 'th').shuffle(HIGH_HALF).op('f64x2.promote_low_f32x4').get('dhi').op('f64x2.add', 'f32x4.demote_f64x2_zero');
  f.shuffle(JOIN_LOW_HALVES).set('t');
  f.get('t').op('f64x2.promote_low_f32x4').get('dlo').op('f64x2.sub', 'f32x4.demote_f64x2_zero');
  f.get('t', 't').shuffle(HIGH_HALF).op('f64x2.promote_low_f32x4').get('dhi').op('f64x2.sub', 'f32x4.demote_f64x2_zero');
  // Lanes whose t does not map back (bit l of `miss`) are redone one by one, in order, by exactElement,
  // then blended with the lanes that did.
  f.shuffle(JOIN_LOW_HALVES).get('th').op('f32x4.eq').tee('ok').op('i32x4.bitmask').i32(15).op('i32.xor').tee('miss');
  f.op('i32.eqz');
  f.if('allRoundTrip');
  f.get('block', 'k').i32(2).op('i32.shl', 'i32.add').get('t').mem('v128.store');
  f.else();
  f.loop('lanes');
  f.get('miss').op('i32.ctz').set('l');
  scalar(() => f.get('k', 'l').op('i32.add'));
  f.get('miss', 'miss').i32(1).op('i32.sub', 'i32.and').tee('miss').brIf('lanes');
  f.end();
  f.get('block', 'k').i32(2).op('i32.shl', 'i32.add').get('t');
  f.get('block', 'k').i32(2).op('i32.shl', 'i32.add').mem('v128.load').get('ok').op('v128.bitselect').mem('v128.store');
  f.end();
  f.get('k').i32(4).op('i32.add').tee('k').get('vecEnd').op('i32.lt_u').brIf('vec');
  f.end();
  f.end();
  f.block('tailDone');
  f.loop('tail');
  f.get('k', 'len').op('i32.ge_u').brIf('tailDone');
  scalar(() => f.get('k'));
  f.get('k').i32(1).op('i32.add').set('k');
  f.br('tail');
  f.end();
  f.end();
  f.get('n');
}

/** The kernel module's bytes. Imports: math.exp and math.log, (f64) → f64. */
export function buildNoiseKernel(): Uint8Array<ArrayBuffer> {
  const m = new ModuleBuilder();
  m.importFunction('exp', 'math', 'exp', { params: ['f64'], results: ['f64'] });
  m.importFunction('log', 'math', 'log', { params: ['f64'], results: ['f64'] });
  m.memory(LAYOUT.pages);
  emitSlowLane(m);
  emitGen(m);
  emitAcceptTestExport(m);
  emitApply(m, 'f32');
  emitApply(m, 'f64');
  emitExactElement(m);
  emitPerturbExact(m);
  return m.encode();
}
