/**
 * gpu-buffer tensors' data on the host, through a session of one Identity per input whose outputs land on the
 * host: getData on a gpu-buffer tensor aborts the process in onnxruntime-node 1.30.
 */
import * as ort from 'onnxruntime-node';
import { GraphBuilder } from '../../../trainer/engine/onnx/graph-builder.ts';
import { DataType, encodeModel } from '../../../trainer/engine/onnx/proto.ts';

export async function readBack(tensors: Record<string, ort.Tensor>): Promise<Record<string, Float32Array>> {
  const g = new GraphBuilder();
  const names = Object.keys(tensors).sort();
  names.forEach((name, i) => {
    g.input(`in${i}`, DataType.FLOAT, [tensors[name].dims[0]]);
    g.nameOutput(g.op1('Identity', [`in${i}`]), `out${i}`);
    g.output(`out${i}`, DataType.FLOAT, [tensors[name].dims[0]]);
  });
  const s = await ort.InferenceSession.create(encodeModel(g.model('read-back')), { executionProviders: ['webgpu'] });
  try {
    const out = await s.run(Object.fromEntries(names.map((n, i) => [`in${i}`, tensors[n]])));
    return Object.fromEntries(names.map((n, i) => [n, out[`out${i}`].data as Float32Array]));
  } finally {
    await s.release();
  }
}
