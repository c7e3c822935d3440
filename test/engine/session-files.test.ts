import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { createSession } from '../../trainer/engine/model/sessions.ts';
import { GraphBuilder } from '../../trainer/engine/onnx/graph-builder.ts';
import { DataType } from '../../trainer/engine/onnx/proto.ts';

// Writes a 2 GiB scratch file and needs memory for θ beside it (docs/BENCHMARKS.md), so it runs on
// request only: ESOPT_LARGE_TESTS=1 npx vitest run test/engine/session-files.test.ts
describe.runIf(process.env.ESOPT_LARGE_TESTS === '1')('sessions past protobuf’s 2 GiB', () => {
  it('a graph whose initializer alone is over 2 GiB becomes a session that reads it', async () => {
    const cols = 64;
    const rows = 2 ** 23 + 16; // 2^29 + 1024 floats
    const table = new Float32Array(rows * cols);
    for (let r = 0; r < rows; r += 2 ** 20) table[r * cols + 1] = r + 0.25;
    const g = new GraphBuilder();
    g.input('ids', DataType.INT64, [3]);
    g.floatTensor('table', table, [rows, cols]);
    g.nameOutput(g.op1('Gather', ['table', 'ids']), 'Y');
    g.output('Y', DataType.FLOAT, [3, cols]);
    const session = await createSession(g.model('large'), {}, 'large test graph');
    const ids = [0, 2 ** 20, 2 ** 23 - 2 ** 20];
    const y = (await session.run({ ids: new ort.Tensor('int64', BigInt64Array.from(ids.map(BigInt)), [3]) })).Y.data as Float32Array;
    expect([y[1], y[cols + 1], y[2 * cols + 1]]).toEqual(ids.map((r) => Math.fround(r + 0.25)));
    await session.release();
  }, 120_000);
});

describe('session scratch directory', () => {
  const tiny = () => {
    const g = new GraphBuilder();
    g.input('x', DataType.FLOAT, [1, 512]);
    g.floatTensor('w', Float32Array.from({ length: 512 * 2 }, (_, i) => i / 1024), [512, 2]);
    g.nameOutput(g.op1('MatMul', ['x', 'w']), 'y');
    g.output('y', DataType.FLOAT, [1, 2]);
    return g.model('tiny');
  };

  it('reads the weights from the external data it wrote, and removes the directory', async () => {
    const root = mkdtempSync(join(tmpdir(), 'esopt-scratch-test-'));
    process.env.ESOPT_SESSION_DIR = root;
    try {
      const session = await createSession(tiny(), {}, 'tiny graph', 0); // 0: through files whatever the size
      expect(readdirSync(root)).toEqual([]);
      const y = (await session.run({ x: new ort.Tensor('float32', new Float32Array(512).fill(1), [1, 512]) })).y.data as Float32Array;
      // Σ_i w[i][j] over i < 512, with w[i][j] = (2i + j) / 1024
      expect(Array.from(y)).toEqual([0, 1].map((j) => Math.fround(Array.from({ length: 512 }, (_, i) => (2 * i + j) / 1024).reduce((a, b) => a + b, 0))));
      await session.release();
    } finally {
      delete process.env.ESOPT_SESSION_DIR;
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('names ESOPT_SESSION_DIR when it cannot write there', async () => {
    process.env.ESOPT_SESSION_DIR = '/nonexistent/esopt';
    try {
      await expect(createSession(tiny(), {}, 'tiny graph', 0)).rejects.toThrow(/tiny graph: could not write the session's graph to a scratch directory \(ESOPT_SESSION_DIR\): ENOENT/);
    } finally {
      delete process.env.ESOPT_SESSION_DIR;
    }
  });
});
