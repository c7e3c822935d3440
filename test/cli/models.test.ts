/**
 * `esopt models push | list | show | rm` over --store and --cloud (s3rver), and `esopt train` on a pushed
 * model by name: the name pinned to its manifest in the stored config, so a re-push under the same name
 * does not change what the run resumes from.
 */
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalS3, type LocalS3 } from '../../trainer/dev/local-cloud/s3-server.ts';
import { keys } from '../../shared/keys.ts';
import { RunConfig } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { main } from '../../trainer/cli/main.ts';
import { transferProgressLines } from '../../trainer/training/model-store/transfer-progress.ts';

const DEMO = fileURLToPath(new URL('../../models/sudoku-4x4-demo', import.meta.url));
const GRID = fileURLToPath(new URL('../../models/sudoku-6x6-grid', import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), 'esopt-models-cli-'));
let s3: LocalS3;
beforeAll(async () => {
  s3 = await startLocalS3('esopt-models-cli');
});
afterAll(async () => {
  await s3?.close();
  rmSync(scratch, { recursive: true, force: true });
});

function run(argv: string[]) {
  let out = '';
  let err = '';
  const io = { stdout: (t: string) => void (out += `${t}\n`), stderr: (t: string) => void (err += `${t}\n`), readStdin: async () => '' };
  return main(argv, io).then((code) => ({ code, out, err }));
}

/** Runs with these variables set, and puts the old ones back. */
async function withEnv<T>(env: Record<string, string>, work: () => Promise<T>): Promise<T> {
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  try {
    return await work();
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

describe('esopt models', () => {
  it('pushes, lists, shows and removes a model in a --store directory, each with --json', async () => {
    const store = join(scratch, 'store-a');
    const pushed = await run(['models', 'push', DEMO, '--store', store, '--json']);
    expect(pushed.code, pushed.err).toBe(0);
    const result = JSON.parse(pushed.out);
    expect(result).toMatchObject({ name: 'sudoku-4x4-demo', files: 5, uploaded: expect.any(Array), alreadyStored: [], store });
    expect(result.manifestSha256).toMatch(/^[0-9a-f]{64}$/);
    // Small files push quietly.
    expect(pushed.err).toBe('');

    const again = await run(['models', 'push', DEMO, '--name', 'demo', '--store', store]);
    expect(again.code).toBe(0);
    expect(again.out).toContain(`pushed demo to ${store}: 5 files`);
    expect(again.out).toContain('0 uploaded, 5 already stored');
    expect(again.out).toContain('{ "model": { "name": "demo" } }');

    const list = JSON.parse((await run(['models', 'list', '--store', store, '--json'])).out);
    expect(list.models.map((m: { name: string }) => m.name)).toEqual(['demo', 'sudoku-4x4-demo']);
    expect(list.models[0]).toMatchObject({ manifestSha256: result.manifestSha256, files: 5, bytes: readdirSync(DEMO).reduce((n, f) => n + readFileSync(join(DEMO, f)).length, 0) });
    expect((await run(['models', 'list', '--store', store])).out).toMatch(/^NAME +MANIFEST +FILES +SIZE +PUSHED\ndemo +[0-9a-f]{12} +5 /);

    const show = JSON.parse((await run(['models', 'show', 'demo', '--store', store, '--json'])).out);
    expect(show.manifest.files.map((f: { path: string }) => f.path)).toEqual(readdirSync(DEMO).sort());
    expect((await run(['models', 'show', 'demo', '--store', store])).out).toContain(`manifest ${result.manifestSha256}`);

    const rm = JSON.parse((await run(['models', 'rm', 'demo', '--store', store, '--json'])).out);
    expect(rm).toMatchObject({ name: 'demo', removed: true, prunedBlobs: [] });
    expect(JSON.parse((await run(['models', 'list', '--store', store, '--json'])).out).models.map((m: { name: string }) => m.name)).toEqual(['sudoku-4x4-demo']);
    expect(await run(['models', 'show', 'demo', '--store', store])).toMatchObject({ code: 1, err: expect.stringContaining('no model named demo') });
    expect(await run(['models', 'rm', 'demo', '--store', store])).toMatchObject({ code: 1, err: expect.stringContaining('no model named demo') });
    // The last name gone, --prune deletes every blob it used.
    expect(JSON.parse((await run(['models', 'rm', 'sudoku-4x4-demo', '--prune', '--grace-hours', '0', '--store', store, '--json'])).out).prunedBlobs).toHaveLength(5);
  });

  it('names what is wrong: no directory, a bad name, a directory that is no model, both stores', async () => {
    const store = join(scratch, 'store-b');
    expect(await run(['models', 'push', '--store', store])).toMatchObject({ code: 2, err: expect.stringContaining('give exactly one model directory') });
    expect(await run(['models', 'push', DEMO, '--name', 'bad/name', '--store', store])).toMatchObject({ code: 2, err: expect.stringContaining('--name: must be 1-64 characters') });
    const odd = join(scratch, 'odd name');
    cpSync(DEMO, odd, { recursive: true });
    expect(await run(['models', 'push', odd, '--store', store])).toMatchObject({ code: 2, err: expect.stringContaining('give one with --name') });
    rmSync(join(odd, 'config.json'));
    expect(await run(['models', 'push', odd, '--name', 'odd', '--store', store])).toMatchObject({ code: 1, err: expect.stringContaining('is missing config.json') });
    expect(await run(['models', 'push', DEMO, '--store', store, '--cloud'])).toMatchObject({ code: 2, err: expect.stringContaining('give one of --store DIR or --cloud') });
    await withEnv({ ESOPT_BUCKET: '' }, async () => {
      expect(await run(['models', 'list', '--cloud'])).toMatchObject({ code: 2, err: expect.stringContaining('ESOPT_BUCKET is not set') });
    });
    expect(await run(['models', 'show', '../x', '--store', store])).toMatchObject({ code: 2, err: expect.stringContaining('not a valid model name') });
  });

  it('pushes to the stack\'s bucket with --cloud, and reports a big file\'s progress on stderr', async () => {
    const dir = join(scratch, 'big');
    cpSync(DEMO, dir, { recursive: true });
    // A sparse 65 MiB file: over the size from which a file's progress is shown, cheap to make.
    writeFileSync(join(dir, 'extra.bin'), '');
    truncateSync(join(dir, 'extra.bin'), 65 * 1024 * 1024);
    const env = { ESOPT_BUCKET: s3.bucket, AWS_ENDPOINT_URL_S3: s3.endpoint, AWS_REGION: 'us-east-1', AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER' };
    await withEnv(env, async () => {
      const pushed = await run(['models', 'push', dir, '--name', 'big', '--cloud', '--json']);
      expect(pushed.code, pushed.err).toBe(0);
      expect(JSON.parse(pushed.out)).toMatchObject({ name: 'big', files: 6, store: `s3://${s3.bucket}` });
      expect(pushed.err).toMatch(/hashing extra\.bin: 65\.0 MiB of 65\.0 MiB \(100%\)/);
      expect(pushed.err).toMatch(/uploading extra\.bin: 65\.0 MiB of 65\.0 MiB \(100%\)/);
      expect(pushed.err).not.toContain('model.onnx');
      const list = JSON.parse((await run(['models', 'list', '--cloud', '--json'])).out);
      expect(list.models.map((m: { name: string }) => m.name)).toEqual(['big']);
    });
  });

  it('prints a big file\'s progress at most once an interval, and always its end', () => {
    const lines: string[] = [];
    let now = 0;
    const report = transferProgressLines((l) => lines.push(l), { minBytes: 100, intervalMs: 1000, now: () => now });
    report({ phase: 'upload', path: 'small', bytes: 50, total: 99 });
    for (const [t, bytes] of [[0, 10], [500, 40], [1000, 60], [1200, 200]] as const) {
      now = t;
      report({ phase: 'upload', path: 'w.bin', bytes, total: 200 });
    }
    expect(lines).toEqual(['uploading w.bin: 10 B of 200 B (5%)', 'uploading w.bin: 60 B of 200 B (30%)', 'uploading w.bin: 200 B of 200 B (100%)']);
  });
});

describe('esopt train on a pushed model', () => {
  it('pins the name to its manifest in the stored config; a re-push does not change what the run resumes from', async () => {
    const store = join(scratch, 'store-train');
    const cache = join(scratch, 'cache-train');
    const demo = JSON.parse((await run(['models', 'push', DEMO, '--name', 'agent', '--store', store, '--json'])).out);
    const configPath = join(scratch, 'run.json');
    writeFileSync(
      configPath,
      JSON.stringify({
        environment: { name: 'sudoku', options: { size: 4, blanks: 2 } },
        tasks: { seed: 1, trainPerIteration: 1, evalCount: 1 },
        model: { name: 'agent' },
        es: { population: 2, sigma: 0.02, alpha: 0.01 },
        iterations: 1,
        evalInterval: 1,
        checkpointInterval: 1,
        policy: 'scripted:random',
        localEpisodes: 'in-process',
      }),
    );
    await withEnv({ ESOPT_MODEL_CACHE: cache }, async () => {
      const trained = await run(['train', '--config', configPath, '--run', 'named', '--store', store, '--json']);
      expect(trained.code, trained.err).toBe(0);
      const stored = RunConfig.parse(JSON.parse(new TextDecoder().decode((await new FsObjectStore(store).get(keys.config('named')))!)));
      expect(stored.model).toEqual({ name: 'agent', manifest: demo.manifestSha256 });
      expect(readdirSync(join(cache, 'store'))).toEqual([demo.manifestSha256]);

      // The name now points at another model; the run resumes from its pinned one (nothing else is pulled), θ as it was.
      const grid = JSON.parse((await run(['models', 'push', GRID, '--name', 'agent', '--store', store, '--json'])).out);
      expect(grid.manifestSha256).not.toBe(demo.manifestSha256);
      const resumed = await run(['train', '--resume', 'named', '--store', store, '--json']);
      expect(resumed.code, resumed.err).toBe(0);
      expect(JSON.parse(resumed.out).thetaHash).toBe(JSON.parse(trained.out).thetaHash);
      expect(readdirSync(join(cache, 'store'))).toEqual([demo.manifestSha256]);

      // An unknown name is refused before the run starts, naming the field.
      writeFileSync(configPath, readFileSync(configPath, 'utf8').replace('"agent"', '"nobody"'));
      expect(await run(['train', '--config', configPath, '--run', 'unknown', '--store', store])).toMatchObject({ code: 2, err: expect.stringContaining('--config: model.name: no model named "nobody"') });
    });
  }, 60_000);
});
