/**
 * The device noise definition (shared/device-noise.ts) as an ONNX graph of uint32 Mul/Add/Sub/Div/Cast and
 * float32 Sub/Mul/Add, the ops onnxruntime's WebGPU provider runs on the device, so a member's θ + σε is
 * made there from θ's buffer, its first element's index and the block's two keys: nothing of θ's size
 * crosses the bus for a member switch. Restoring θ is dropping the output. The indices are an int32
 * Range (int64's runs on the CPU), so a call covers under 2^31 elements within one key block.
 *   inputs  theta float32 [n], offset uint32 [1] (θ[0]'s index mod 2^32), k0 uint32 [1], k1 uint32 [1],
 *           sigma float32 [1]
 *   output  perturbed float32 [n]
 */
import { CENTRE, GOLDEN, MIX_ROUNDS, SCALE } from '../../shared/device-noise.ts';
import { GraphBuilder } from '../onnx/graph-builder.ts';
import { DataType, type ModelProto } from '../onnx/proto.ts';

export function deviceNoiseGraph(): ModelProto {
  const g = new GraphBuilder();
  const theta = g.input('theta', DataType.FLOAT, ['n']);
  const offset = g.input('offset', DataType.UINT32, [1]);
  const keys = [g.input('k0', DataType.UINT32, [1]), g.input('k1', DataType.UINT32, [1])];
  const sigma = g.input('sigma', DataType.FLOAT, [1]);
  // one initializer per value: onnxruntime would merge duplicates and warn about the ones left unused
  const consts = new Map<number, string>();
  const u32 = (v: number) => consts.get(v) ?? consts.set(v, g.uint32Const([v])).get(v)!;
  const mix = (start: string) => {
    let x = start;
    for (const [shift, m] of MIX_ROUNDS) {
      // x >>> shift is an exact unsigned division by 2^shift (BitShift has no WebGPU kernel)
      x = g.op1('Add', [x, g.op1('Div', [x, u32(2 ** shift)])]);
      x = g.op1('Mul', [x, u32(m)]);
    }
    return x;
  };
  const n = g.op1('Cast', [g.op1('Squeeze', [g.op1('Shape', [theta]), g.int64Const([0])])], { to: DataType.INT32 });
  const range = g.op1('Range', [g.int32Scalar(0), n, g.int32Scalar(1)]);
  const index = g.op1('Add', [g.op1('Cast', [range], { to: DataType.UINT32 }), offset]);
  const h0 = mix(g.op1('Add', [g.op1('Mul', [index, u32(GOLDEN)]), keys[0]]));
  const h1 = mix(g.op1('Add', [h0, keys[1]]));
  const halves = [h0, h1].flatMap((h) => {
    const hi = g.op1('Div', [h, u32(65536)]);
    return [hi, g.op1('Sub', [h, g.op1('Mul', [hi, u32(65536)])])];
  });
  const sum = halves.slice(1).reduce((a, h) => g.op1('Add', [a, h]), halves[0]);
  const centred = g.op1('Sub', [g.op1('Cast', [sum], { to: DataType.FLOAT }), g.floatScalar(CENTRE)]);
  const eps = g.op1('Mul', [centred, g.floatScalar(SCALE)]);
  const out = g.op1('Add', [theta, g.op1('Mul', [eps, sigma])]);
  g.nameOutput(out, 'perturbed');
  g.output('perturbed', DataType.FLOAT, ['n']);
  return g.model('device-noise');
}
