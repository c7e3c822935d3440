/**
 * `esopt export` through the CLI, on a tiny run that `esopt train` made on a temp store (3 iterations,
 * checkpoints at 2 and at the end): the latest θ as ONNX (the trained θ hash, files with their real sizes and digests,
 * progress on stderr), an earlier iteration as safetensors (the log's θ hash), and usage and range errors.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExportSummary, RunArtifact } from '../../shared/schemas/index.ts';
import { main } from '../../trainer/cli/main.ts';
import { baseConfig, esopt, type Report } from '../training/helpers/killable-run.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-export-cli-'));
const store = join(root, 'store');
afterAll(() => rmSync(root, { recursive: true, force: true }));

async function cli(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(['export', ...argv], { stdout: (t) => (out += `${t}\n`), stderr: (t) => (err += `${t}\n`), readStdin: async () => '' });
  return { code, out, err };
}

describe('esopt export', () => {
  let trained: Report;
  beforeAll(async () => {
    writeFileSync(join(root, 'config.json'), JSON.stringify(baseConfig));
    const r = await esopt(['train', '--config', join(root, 'config.json'), '--run', 'tiny', '--store', store, '--json']);
    expect(r.code, r.stderr).toBe(0);
    trained = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as Report;
  }, 120_000);

  it('exports the latest θ as an ONNX directory that onnxruntime loads, with a JSON summary of every file', async () => {
    const out = join(root, 'latest');
    const r = await cli('--run', 'tiny', '--store', store, '--out', out, '--json');
    expect(r.code, r.err).toBe(0);
    const summary = ExportSummary.parse(JSON.parse(r.out));
    expect(summary).toMatchObject({ run: 'tiny', iteration: 3, format: 'onnx', out, thetaHash: trained.thetaHash, checkpoint: 3, replayed: 0, model: { preset: 'tiny', seed: 1 } });
    expect(summary.files.map((f) => f.path)).toEqual(['config.json', 'model.onnx', 'model.onnx_data', 'tokenizer.json', 'tokenizer_config.json']);
    for (const f of summary.files) {
      const bytes = readFileSync(join(out, f.path));
      expect({ path: f.path, bytes: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') }).toEqual(f);
    }
    expect(r.err).toMatch(/export: restoring θ of run tiny at its latest iteration/);
    expect(r.err).toMatch(/export: θ_3 \([0-9a-f]+\): checkpoint 3 \+ 0 log entries/);
    const session = await ort.InferenceSession.create(join(out, 'model.onnx'));
    expect(session.outputNames).toContain('logits');
    await session.release();
  });

  it('exports an earlier iteration as safetensors, its θ hash the log’s', async () => {
    const log = readFileSync(join(store, 'runs/tiny/log.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { thetaHashAfter: string });
    const out = join(root, 'first');
    const r = await cli('--run', 'tiny', '--store', store, '--out', out, '--iteration', '1', '--format', 'safetensors');
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain(`run tiny: θ_1 (${log[0].thetaHashAfter}) as safetensors in ${out}`);
    expect(r.out).toMatch(/model\.safetensors {2}[0-9.]+ MiB {2}sha256 [0-9a-f]{64}/);
  });

  it('writes the run as a portable artifact: θ_0 and every logged update', async () => {
    const out = join(root, 'portable');
    const r = await cli('--run', 'tiny', '--store', store, '--out', out, '--format', 'run', '--json');
    expect(r.code, r.err).toBe(0);
    const summary = JSON.parse(r.out) as { updates: number; files: Record<string, string> };
    expect(summary.updates).toBe(3);
    const artifact = RunArtifact.parse(JSON.parse(readFileSync(summary.files.json, 'utf8')));
    const log = readFileSync(join(store, 'runs/tiny/log.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { thetaHashAfter: string });
    expect(artifact.updates.map((u) => u.thetaHashAfter)).toEqual(log.map((e) => e.thetaHashAfter));
    expect((await cli('--run', 'tiny', '--store', store, '--out', join(root, 'portable-2'), '--format', 'run', '--iteration', '1')).code).toBe(2);
  });

  it('refuses an iteration past the log, a used --out, and bad usage', async () => {
    const past = await cli('--run', 'tiny', '--store', store, '--out', join(root, 'past'), '--iteration', '4');
    expect([past.code, past.err]).toEqual([1, expect.stringContaining("iteration 4 is beyond run tiny's log, which holds the updates of iterations 0…2 (θ_0 … θ_3)")]);
    const used = await cli('--run', 'tiny', '--store', store, '--out', join(root, 'latest'));
    expect([used.code, used.err]).toEqual([1, expect.stringContaining('exists and is not an empty directory')]);
    expect((await cli('--run', 'tiny', '--store', store)).err).toContain('--out is required');
    expect((await cli('--run', 'tiny', '--out', join(root, 'x'), '--format', 'gguf')).code).toBe(2);
    expect((await cli('--run', 'tiny', '--out', join(root, 'x'), '--iteration', 'two')).code).toBe(2);
    expect((await cli('--run', 'tiny', '--out', join(root, 'x'), '--store', store, '--cloud')).err).toContain('give one of --store DIR or --cloud');
    expect((await cli('--run', 'nope', '--store', store, '--out', join(root, 'x'))).err).toContain('no run nope in the store');
  });
});
