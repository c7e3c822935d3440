/**
 * The wire-level initializer rewrite: an initializer held in typed fields (float_data) gets raw_data in
 * their place, an external one is written over in a copy of its data file at its offset, a subgraph's
 * initializer is reached, a length mismatch is refused naming the tensor, and bytes the project's
 * onnx.proto does not know (a field it leaves out) come through unchanged.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { patchInitializers } from '../../trainer/engine/onnx/initializer-patch.ts';
import { DataType, decodeModel, encodeModel, type ModelProto, type TensorProto } from '../../trainer/engine/onnx/proto.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-patch-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const floats = (...v: number[]) => new Uint8Array(Float32Array.from(v).buffer);

function model(): ModelProto {
  const sub: TensorProto = { name: 'inner', dims: [2], dataType: DataType.FLOAT, rawData: floats(5, 6) };
  return {
    irVersion: 8,
    opsetImport: [{ domain: '', version: 14 }],
    graph: {
      name: 'g',
      node: [{ name: 'if', opType: 'If', domain: '', input: ['c'], output: ['y'], attribute: [{ name: 'then_branch', type: 5, g: { name: 'then', node: [], initializer: [sub], input: [], output: [], valueInfo: [] } }] }],
      initializer: [
        { name: 'typed', dims: [3], dataType: DataType.FLOAT, floatData: [1, 2, 3] },
        { name: 'outside', dims: [2], dataType: DataType.FLOAT, dataLocation: 1, externalData: [{ key: 'location', value: 'w.bin' }, { key: 'offset', value: '8' }, { key: 'length', value: '8' }] },
        { name: 'kept', dims: [1], dataType: DataType.FLOAT, rawData: floats(9) },
      ],
      input: [],
      output: [],
      valueInfo: [],
    },
  };
}

it('rewrites typed, external and subgraph initializers and keeps every other byte', () => {
  const src = join(root, 'src');
  mkdirSync(src);
  // an unknown field (number 99, varint 7) at the end of the model: protobuf readers skip it, the patch keeps it
  const unknown = Uint8Array.from([0x98, 0x06, 0x07]);
  writeFileSync(join(src, 'm.onnx'), Buffer.concat([encodeModel(model()), unknown]));
  writeFileSync(join(src, 'w.bin'), Buffer.concat([Buffer.alloc(8, 0xaa), floats(7, 8), Buffer.alloc(4, 0xbb)]));
  const out = join(root, 'out');
  mkdirSync(out);
  const values: Record<string, number[]> = { typed: [10, 20, 30], outside: [70, 80], inner: [50, 60] };
  const { dataFiles } = patchInitializers(src, 'm.onnx', out, (t) => (values[t.name] ? () => floats(...values[t.name]) : undefined));
  expect(dataFiles).toEqual(['w.bin']);
  const bytes = readFileSync(join(out, 'm.onnx'));
  expect(bytes.subarray(bytes.length - 3)).toEqual(Buffer.from(unknown));
  const g = decodeModel(bytes).graph;
  const f32 = (t: TensorProto) => Array.from(new Float32Array(Uint8Array.from(t.rawData!).buffer));
  expect(f32(g.initializer[0])).toEqual([10, 20, 30]);
  expect(g.initializer[0].floatData ?? []).toEqual([]);
  expect(g.initializer[1].externalData).toEqual(model().graph.initializer[1].externalData);
  expect(f32(g.initializer[2])).toEqual([9]);
  expect(f32(g.node[0].attribute[0].g!.initializer[0])).toEqual([50, 60]);
  // the data file is the original with the tensor's 8 bytes replaced, nothing around them touched
  expect(readFileSync(join(out, 'w.bin'))).toEqual(Buffer.concat([Buffer.alloc(8, 0xaa), floats(70, 80), Buffer.alloc(4, 0xbb)]));
  expect(readFileSync(join(src, 'w.bin')).subarray(8, 16)).toEqual(Buffer.from(floats(7, 8)));
  expect(() => patchInitializers(src, 'm.onnx', join(root, 'bad'), (t) => (t.name === 'kept' ? () => floats(1, 2) : undefined))).toThrow('new data for initializer "kept" has 8 bytes, the original 4');
});
