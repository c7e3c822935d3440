/**
 * The machine's memory read bandwidth as onnxruntime sees it: a ReduceSum over a float32 tensor far larger
 * than the caches, on the same provider and thread count a decode step uses. A decode step that reads θ once
 * for the whole batch can go no faster than θ's bytes ÷ this rate; that is the limit the peer benchmark
 * reports beside the measured rates.
 */
import * as ort from 'onnxruntime-node';
import { GraphBuilder } from '../../engine/onnx/graph-builder.ts';
import { DataType } from '../../engine/onnx/proto.ts';
import { createSession } from '../../engine/model/sessions.ts';
import { median, timeMs } from './measure.ts';

export interface Bandwidth {
  bytes: number;
  repeats: number;
  bytes_per_s: number;
}

export async function readBandwidth(o: { mebibytes: number; repeats: number; threads?: number }): Promise<Bandwidth> {
  const n = (o.mebibytes * 2 ** 20) / 4;
  const g = new GraphBuilder();
  g.output(g.nameOutput(g.op1('ReduceSum', [g.input('x', DataType.FLOAT, [n])], { keepdims: 0 }), 'sum'), DataType.FLOAT, []);
  const session = await createSession(g.model('read-bandwidth'), { executionProvider: 'cpu', threads: o.threads }, 'read bandwidth');
  // ones, so the sum is exact and checkable: a reduction that skipped data would not reach n
  const x = new ort.Tensor('float32', new Float32Array(n).fill(1), [n]);
  try {
    const first = await session.run({ x });
    const sum = (first.sum.data as Float32Array)[0];
    if (Math.abs(sum - n) > n * 1e-3) throw new Error(`read bandwidth: ReduceSum gave ${sum}, expected ${n}`);
    const ms: number[] = [];
    for (let r = 0; r < o.repeats; r++) ms.push(await timeMs(() => session.run({ x })));
    return { bytes: n * 4, repeats: o.repeats, bytes_per_s: (n * 4) / (median(ms) / 1000) };
  } finally {
    await session.release();
  }
}
