/**
 * A model whose external data file is over 2 GiB, pushed to the fs store and pulled into the cache in a
 * child process, whose peak RSS (getrusage's ru_maxrss, not a sample) shows the file streamed through and
 * never held. The file is sparse (cheap to make) with marker bytes on both sides of 2 GiB, so the copy's
 * offsets past 2^31 are checked; then one byte of the stored blob is flipped and a fresh pull must refuse
 * it, naming the file, and cache nothing.
 */
import { spawn } from 'node:child_process';
import { closeSync, cpSync, existsSync, mkdtempSync, openSync, readdirSync, readSync, rmSync, truncateSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { keys } from '../../shared/keys.ts';
import { readNamedModel } from '../../shared/model-catalog.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';

const DEMO = fileURLToPath(new URL('../../models/sudoku-4x4-demo', import.meta.url));
const SIZE = 2 * 1024 ** 3 + 3 * 1024 ** 2 + 5;
const MARKERS = [0, 1024 ** 3, 2 ** 31 - 1, 2 ** 31, 2 ** 31 + 4097, SIZE - 1];
const scratch = mkdtempSync(join(tmpdir(), 'esopt-large-model-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function atOffsets(path: string, write?: (offset: number) => number): number[] {
  const fd = openSync(path, write ? 'r+' : 'r');
  try {
    return MARKERS.map((offset) => {
      const byte = Buffer.alloc(1);
      if (write) writeSync(fd, Buffer.from([write(offset)]), 0, 1, offset);
      readSync(fd, byte, 0, 1, offset);
      return byte[0];
    });
  } finally {
    closeSync(fd);
  }
}

/** The child: push (unless `push` is false), pull into the cache, then report its own peak RSS and what it did. */
const script = (dir: string, store: string, cache: string, push = true) => `
  const { FsObjectStore } = await import(${JSON.stringify(new URL('../../shared/store/fs.ts', import.meta.url).href)});
  const { pushModel } = await import(${JSON.stringify(new URL('../../trainer/training/model-store/push-model.ts', import.meta.url).href)});
  const { resolveModelSpec } = await import(${JSON.stringify(new URL('../../trainer/training/model-store/resolve-model.ts', import.meta.url).href)});
  const store = new FsObjectStore(${JSON.stringify(store)});
  const t0 = Date.now();
  const pushed = ${push} ? await pushModel(store, ${JSON.stringify(dir)}, { name: 'large' }) : null;
  const t1 = Date.now();
  const local = await resolveModelSpec({ name: 'large' }, store, { cacheRoot: ${JSON.stringify(cache)} });
  const t2 = Date.now();
  process.stdout.write(JSON.stringify({ pushed, local, pushMs: t1 - t0, pullMs: t2 - t1, maxRssBytes: process.resourceUsage().maxRSS * 1024 }));`;

function child(code: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => (stdout += d));
    p.stderr.on('data', (d) => (stderr += d));
    p.on('error', reject);
    p.on('exit', (c) => resolve({ code: c, stdout, stderr }));
  });
}

describe('a model over 2 GiB', () => {
  it('pushes and pulls streamed (peak RSS far below the file), every byte checked by its sha256', async () => {
    const dir = join(scratch, 'large');
    cpSync(DEMO, dir, { recursive: true });
    const data = join(dir, 'model.onnx_data');
    truncateSync(data, 0);
    truncateSync(data, SIZE);
    const markers = atOffsets(data, (offset) => 1 + (offset % 251));
    const store = join(scratch, 'store');
    const cache = join(scratch, 'cache');

    const r = await child(script(dir, store, cache));
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout) as { pushed: { manifestSha256: string; uploaded: string[] }; local: { dir: string }; pushMs: number; pullMs: number; maxRssBytes: number };
    console.log(`2 GiB model: push ${out.pushMs} ms, pull ${out.pullMs} ms, child peak RSS ${(out.maxRssBytes / 2 ** 20).toFixed(0)} MiB`);
    expect(out.pushed.uploaded).toContain('model.onnx_data');
    // Streamed: the whole process, runtime and loaded modules included, peaked under half the file, so the file
    // was never held whole (110–150 MiB on a quiet machine; chunks the GC has not yet freed raised it to 580 MiB
    // on a loaded one).
    expect(out.maxRssBytes).toBeLessThan(SIZE / 2);
    const pulled = join(out.local.dir, 'model.onnx_data');
    expect(atOffsets(pulled)).toEqual(markers);
    expect(readdirSync(join(cache, 'store'))).toEqual([out.pushed.manifestSha256]);

    // One byte of the stored blob flipped past 2 GiB: a fresh pull reads it to the end and refuses it.
    const record = (await readNamedModel(new FsObjectStore(store), 'large'))!;
    const blob = join(store, ...keys.modelBlob(record.manifest.files.find((f) => f.path === 'model.onnx_data')!.sha256).split('/'));
    const fd = openSync(blob, 'r+');
    writeSync(fd, Buffer.from([0]), 0, 1, 2 ** 31 + 4097);
    closeSync(fd);
    const fresh = join(scratch, 'cache-2');
    const refused = await child(script(dir, store, fresh, false));
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/model large@[0-9a-f]{12}: model\.onnx_data does not match its manifest/);
    expect(existsSync(join(fresh, 'store')) ? readdirSync(join(fresh, 'store')) : []).toEqual([]);
  }, 120_000);
});
