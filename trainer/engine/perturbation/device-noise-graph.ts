/**
 * The device noise definition (shared/device-noise.ts) as an ONNX graph of uint32 Mul/Add/Sub/Div/Cast and
 * float32 Sub/Mul/Add, the ops onnxruntime's WebGPU provider runs on the device, so a member's θ + σε is
 * made there from θ's buffer, its first element's index and the block's two keys: nothing of θ's size
 * crosses the bus for a member switch. Restoring θ is dropping the output. The indices are an int32
 * Range (int64's runs on the CPU), so a call covers under 2^31 elements within one key block.
 *   inputs  theta float32 [n], offset uint32 [1] (θ[0]'s index mod 2^32), k0 uint32 [1], k1 uint32 [1],
 *           sigma float32 [1]
 *   output  perturbed float32 [n]
 * Its grouped form (`groupedDeviceNoiseGraph`) takes m pieces whose stream indices follow one another,
 * joins them, runs the same nodes once over the join and splits the result: one run's dispatches for m pieces.
 */
import { CENTRE, GOLDEN, ROUND_CONSTANTS, SCALE } from '../../../shared/device-noise.ts';
import { GraphBuilder } from '../onnx/graph-builder.ts';
import { DataType, type ModelProto } from '../onnx/proto.ts';

/** The most elements one graph run covers: its indices are an int32 Range. */
export const MAX_NOISE_ELEMENTS = 2 ** 31 - 1;

/**
 * Outputs a Split node has at most: with its input, 8 storage buffers, the least a WebGPU device must allow
 * a shader stage (onnxruntime's WebGPU Split binds them all in one shader; its Concat batches its inputs).
 */
export const SPLIT_FAN_OUT = 7;

/** The scalar inputs both forms take: θ[0]'s index mod 2^32, the block's keys and σ. */
function scalarInputs(g: GraphBuilder) {
  return {
    offset: g.input('offset', DataType.UINT32, [1]),
    keys: [g.input('k0', DataType.UINT32, [1]), g.input('k1', DataType.UINT32, [1])] as const,
    sigma: g.input('sigma', DataType.FLOAT, [1]),
  };
}

/** The nodes making fl32(θ + fl32(σ·ε)) from flat `theta`, element j's index being offset + j; returns the result's name. */
function noiseNodes(g: GraphBuilder, theta: string, s: ReturnType<typeof scalarInputs>): string {
  const { offset, keys, sigma } = s;
  // one initializer per value: onnxruntime would merge duplicates and warn about the ones left unused
  const consts = new Map<number, string>();
  const u32 = (v: number) => consts.get(v) ?? consts.set(v, g.uint32Const([v])).get(v)!;
  const add = (x: string, y: string) => g.op1('Add', [x, y]);
  const mul = (x: string, y: string) => g.op1('Mul', [x, y]);
  // rot16(x·(2x + c)); ⌊y / 2^16⌋ is an exact unsigned division (BitShift has no WebGPU kernel) and
  // y·2^16 wraps mod 2^32 as the reference's, keeping y's low half only
  const round = (x: string, c: number) => {
    const y = mul(add(add(x, x), u32(c)), x);
    return add(g.op1('Div', [y, u32(65536)]), mul(y, u32(65536)));
  };
  const n = g.op1('Cast', [g.op1('Squeeze', [g.op1('Shape', [theta]), g.int64Const([0])])], { to: DataType.INT32 });
  const range = g.op1('Range', [g.int32Scalar(0), n, g.int32Scalar(1)]);
  const index = g.op1('Add', [g.op1('Cast', [range], { to: DataType.UINT32 }), offset]);
  let x = round(add(mul(index, u32(GOLDEN)), keys[0]), ROUND_CONSTANTS[0]);
  x = add(x, keys[1]);
  for (let r = 1; r < 4; r++) x = round(x, ROUND_CONSTANTS[r]);
  const h0 = x;
  x = add(h0, keys[0]);
  for (let r = 4; r < 6; r++) x = round(x, ROUND_CONSTANTS[r]);
  const h1 = x;
  // S = h0 + h1 − 65535·(⌊h0/2^16⌋ + ⌊h1/2^16⌋), the sum of the four halves: exact mod 2^32, and S < 2^18
  const highs = add(g.op1('Div', [h0, u32(65536)]), g.op1('Div', [h1, u32(65536)]));
  const sum = g.op1('Sub', [add(h0, h1), mul(highs, u32(65535))]);
  const centred = g.op1('Sub', [g.op1('Cast', [sum], { to: DataType.FLOAT }), g.floatScalar(CENTRE)]);
  const eps = g.op1('Mul', [centred, g.floatScalar(SCALE)]);
  return g.op1('Add', [theta, g.op1('Mul', [eps, sigma])]);
}

export function deviceNoiseGraph(): ModelProto {
  const g = new GraphBuilder();
  const theta = g.input('theta', DataType.FLOAT, ['n']);
  g.nameOutput(noiseNodes(g, theta, scalarInputs(g)), 'perturbed');
  g.output('perturbed', DataType.FLOAT, ['n']);
  return g.model('device-noise');
}

/**
 * The noise over m pieces of lengths `lengths` whose stream indices follow one another in one key block:
 * inputs theta.0 … theta.{m−1} float32 [lengths[j]] and the scalar inputs above (offset: theta.0[0]'s index
 * mod 2^32), outputs perturbed.0 … perturbed.{m−1}. The Split's sizes are an initializer, so nothing but the
 * scalars is fed from the host.
 */
/** `flat` cut into parts of `lengths`: Splits of at most SPLIT_FAN_OUT outputs, each splitting a run of consecutive parts further. */
function splitTree(g: GraphBuilder, flat: string, lengths: readonly number[]): string[] {
  if (lengths.length === 1) return [flat];
  const runs: number[][] = [];
  const per = Math.ceil(lengths.length / SPLIT_FAN_OUT);
  for (let j = 0; j < lengths.length; j += per) runs.push(lengths.slice(j, j + per));
  const sums = runs.map((r) => r.reduce((a, l) => a + l, 0));
  const outs = g.op('Split', [flat, g.int64Const(sums)], { axis: 0 }, runs.length);
  return runs.flatMap((r, k) => splitTree(g, outs[k], r));
}

export function groupedDeviceNoiseGraph(lengths: readonly number[]): ModelProto {
  if (lengths.length < 2) throw new RangeError(`a grouped noise graph joins at least 2 pieces, got ${lengths.length}`);
  for (const [j, l] of lengths.entries()) if (!Number.isInteger(l) || l < 1) throw new RangeError(`lengths[${j}] must be a positive integer, got ${l}`);
  const total = lengths.reduce((a, l) => a + l, 0);
  if (total > MAX_NOISE_ELEMENTS) throw new RangeError(`a group covers at most ${MAX_NOISE_ELEMENTS} elements (an int32 Range), got ${total}`);
  const g = new GraphBuilder();
  // symbolic lengths: fixed ones would let onnxruntime fold the Range into an int32 initializer of the group's size
  const pieces = lengths.map((_, j) => g.input(`theta.${j}`, DataType.FLOAT, [`n${j}`]));
  const scalars = scalarInputs(g);
  const joined = g.op1('Concat', pieces, { axis: 0 });
  const parts = splitTree(g, noiseNodes(g, joined, scalars), lengths);
  parts.forEach((p, j) => {
    g.nameOutput(p, `perturbed.${j}`);
    g.output(`perturbed.${j}`, DataType.FLOAT, [`n${j}`]);
  });
  return g.model('device-noise-grouped');
}
