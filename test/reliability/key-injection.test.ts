/**
 * Path and key injection. Run, task, evaluation and member ids that try `../`, absolute paths, NUL,
 * backslashes, separators or unicode look-alikes are refused at every layer on their own:
 *   the schemas (a 400 naming the field, from the API too),
 *   the key builder (shared/keys.ts throws, whatever the caller skipped),
 *   and both stores called directly — the filesystem store never touches a path outside its root, and
 *   the S3 store sends nothing for such a key; odd-but-legal keys are stored under exactly their name.
 */
import { mkdirSync, mkdtempSync, readdirSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, sep } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys, parseRewardKey } from '../../shared/keys.ts';
import { EpisodeRequest, EvaluationRequest, Id, RunConfig } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { S3ObjectStore } from '../../shared/store/s3.ts';
import { startLocalS3, type LocalS3 } from '../../trainer/dev/local-cloud/s3-server.ts';
import { tinyRunConfig } from '../api/helpers.ts';
import { startLoopbackProxy, type LoopbackProxy } from '../cloud/helpers/loopback-proxy.ts';
import { apiOverTempStore } from './helpers/api-app.ts';

/** Ids that try to leave their prefix or smuggle in a separator. */
const HOSTILE_IDS = [
  '..', '.', '../x', '../../etc/passwd', '/abs', '/etc/passwd', 'a/b', 'a/../../b', 'a\\b', '..\\..\\x', 'C:\\x', 'a\u0000b', '\u0000',
  '.hidden', '', ' ', 'a b', '-leading-dash', '_leading', 'x'.repeat(65), '%2e%2e', '%2F', 'a%2fb', '\u2215etc', '\uff0e\uff0e', '\u2024\u2024', 'é', 'a\u202eb',
  'a\nb', 'a\tb', 'run\u200b', '~', '~root', 'a:b', 'a*', 'a?', 'con.json',
];

/** Keys a caller could hand a store directly. */
const HOSTILE_KEYS = [
  '../x', '../../outside.json', '/etc/passwd', '/abs/key', 'runs/../../x', 'runs/r/../../../x', 'a//b', 'a/./b', 'a/', '/', '', '.', '..', 'a\\..\\..\\x',
  'a\u0000b', 'runs/r\u0000/x', '.esopt-tmp/x', '.esopt-tmp', 'x'.repeat(1025),
];

/** Strange but legal: stored under exactly this name, in both stores. */
const ODD_LEGAL_KEYS = ['runs/é/x.json', 'runs/%2e%2e/%2e%2e/x', 'runs/..a/a..', 'runs/a b/c d', 'runs/~/+#&=', 'runs/\u202egnp.exe', 'runs/\uff0e\uff0e/x', 'runs/\u2215etc'];

describe('ids at the schema level', () => {
  it('refuses every hostile id with a message that says what an id may be', () => {
    for (const bad of HOSTILE_IDS) {
      const r = Id.safeParse(bad);
      expect(r.success, JSON.stringify(bad)).toBe(false);
      expect(r.error?.issues[0].message).toMatch(/letters, digits, "_" or "-"/);
    }
  });

  it('names the field of every id a run config, an evaluation request or an episode request carries', () => {
    const bad = '../../etc';
    expect(RunConfig.safeParse({ ...tinyRunConfig(), name: bad }).error?.issues.map((i) => i.path.join('.'))).toEqual(['name']);
    const evaluation = { model: { kind: 'checkpoint', run: bad }, environment: { name: 'sudoku' }, tasks: { tasks: [{ id: bad, task: {} }] }, episodes: 1 };
    expect(EvaluationRequest.safeParse(evaluation).error?.issues.map((i) => i.path.join('.')).sort()).toEqual(['model.run', 'tasks.tasks.0.id']);
    const episode = {
      run: bad, iteration: -1, member: '../0', task: { id: 'a/b', value: null }, environment: { name: 'sudoku' }, policy: { baseUrl: 'http://127.0.0.1:1/v1', model: 'base' },
      generation: { temperature: 0, topP: 1, topK: 0, maxTokens: 4 }, seed: 0, deadline: new Date().toISOString(),
    };
    expect(EpisodeRequest.safeParse(episode).error?.issues.map((i) => i.path.join('.')).sort()).toEqual(['iteration', 'member', 'run', 'task.id']);
  });

  it('answers the API with 400 and the field path, and writes nothing', async () => {
    const api = apiOverTempStore('key-injection-token-1');
    const auth = { authorization: 'Bearer key-injection-token-1', 'content-type': 'application/json' };
    try {
      for (const bad of ['../x', '/abs', 'a\\b', '.hidden', 'é']) {
        const run = await api.app.request('/runs', { method: 'POST', headers: auth, body: JSON.stringify({ ...tinyRunConfig(), name: bad }) });
        expect(run.status).toBe(400);
        expect(((await run.json()) as { error: { issues: Array<{ path: string }> } }).error.issues.map((i) => i.path)).toEqual(['name']);
        const tasks = { tasks: [{ id: bad, task: { size: 4, puzzle: '1234341221434321', solution: '1234341221434321' } }] };
        const evaluation = await api.app.request('/evaluations', { method: 'POST', headers: auth, body: JSON.stringify({ model: { kind: 'checkpoint', run: bad }, environment: { name: 'sudoku' }, tasks, episodes: 1 }) });
        expect(evaluation.status).toBe(400);
        expect(((await evaluation.json()) as { error: { issues: Array<{ path: string }> } }).error.issues.map((i) => i.path)).toEqual(expect.arrayContaining(['model.run', 'tasks.tasks.0.id']));
      }
      for (const path of ['/runs/..%2F..%2Fetc', '/runs/a%5Cb/stop', '/runs/%00/metrics', '/evaluations/..%2Fx', '/runs/.hidden/checkpoints']) {
        const res = await api.app.request(path, { method: path.endsWith('/stop') ? 'POST' : 'GET', headers: auth });
        expect(res.status, path).toBe(400);
        expect(((await res.json()) as { error: { issues: Array<{ path: string }> } }).error.issues.map((i) => i.path), path).toEqual(['id']);
      }
      // URL parsing (WHATWG) resolves an encoded dot-dot segment before routing: the dashboard shell, not a run.
      const dotDot = await api.app.request('/runs/%2e%2e', { headers: auth });
      expect(dotDot.headers.get('content-type')).toMatch(/^text\/html/);
      expect(await api.store.list('')).toEqual([]);
    } finally {
      api.dispose();
    }
  });
});

describe('ids at the key builder', () => {
  it('throws for every hostile id in every position, before any key exists', () => {
    for (const bad of HOSTILE_IDS) {
      expect(() => keys.config(bad), JSON.stringify(bad)).toThrow(/invalid run id/);
      expect(() => keys.reward('r', 0, 0, bad)).toThrow(/invalid task id/);
      expect(() => keys.transcript('r', 0, 'base', bad)).toThrow(/invalid task id/);
      expect(() => keys.evaluationStatus(bad)).toThrow(/invalid evaluation id/);
      expect(() => keys.queuedWork('run', bad)).toThrow(/invalid run id/);
    }
    for (const member of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '../0', '0/..', 'base/..'] as never[]) expect(() => keys.reward('r', 0, member, 't')).toThrow(/invalid member/);
    for (const k of [-1, 0.5, Number.NaN, 2e9]) expect(() => keys.manifest('r', k)).toThrow(/invalid iteration/);
    expect(() => keys.idempotency('../x')).toThrow(/invalid idempotency hash/);
  });

  it('for any string: a key is built only from a valid id, and then stays in its prefix with one segment per id', () => {
    const anyId = fc.oneof(fc.constantFrom(...HOSTILE_IDS), fc.string({ unit: 'binary', maxLength: 70 }), fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/));
    fc.assert(
      fc.property(anyId, anyId, fc.oneof(fc.nat(1_000_000), fc.constant('base' as const)), (run, task, member) => {
        const valid = Id.safeParse(run).success && Id.safeParse(task).success;
        if (!valid) {
          expect(() => keys.reward(run, 3, member, task)).toThrow(/invalid (run|task) id/);
          return;
        }
        const key = keys.reward(run, 3, member, task);
        expect(key.startsWith(`runs/${run}/iterations/`)).toBe(true);
        expect(key.split('/')).toHaveLength(7);
        expect(parseRewardKey(key)).toEqual({ run, iteration: 3, member, task });
      }),
      { numRuns: 2000 },
    );
  });
});

/** A store root inside a parent directory the test watches: nothing may appear next to the root. */
function watchedRoot(): { parent: string; root: string } {
  const parent = mkdtempSync(join(tmpdir(), 'esopt-key-injection-'));
  const root = join(parent, 'store');
  mkdirSync(root);
  writeFileSync(join(parent, 'sentinel'), 'outside the store');
  return { parent, root };
}

/** Every file under `dir`, relative, with `/` separators. */
function filesUnder(dir: string): string[] {
  return (readdirSync(dir, { recursive: true, withFileTypes: true }) as import('node:fs').Dirent[])
    .filter((d) => d.isFile())
    .map((d) => join(d.parentPath, d.name).slice(dir.length + 1).split(sep).join('/'))
    .sort();
}

describe('the filesystem store called directly', () => {
  let parent: string;
  let root: string;
  let store: FsObjectStore;
  beforeAll(() => {
    ({ parent, root } = watchedRoot());
    store = new FsObjectStore(root);
  });
  afterAll(() => rmSync(parent, { recursive: true, force: true }));

  it('refuses every hostile key for put, get, delete, and every hostile prefix for list', async () => {
    for (const key of HOSTILE_KEYS) {
      await expect(store.put(key, 'escaped'), JSON.stringify(key)).rejects.toThrow(/invalid store key/);
      await expect(store.put(key, 'escaped', { ifAbsent: true })).rejects.toThrow(/invalid store key/);
      await expect(store.get(key)).rejects.toThrow(/invalid store key/);
      await expect(store.delete(key)).rejects.toThrow(/invalid store key/);
    }
    for (const prefix of ['../', '/etc', '..', 'runs/../..', 'a\\b', 'a\u0000']) await expect(store.list(prefix), prefix).rejects.toThrow(/invalid store prefix/);
    expect(filesUnder(parent)).toEqual(['sentinel']);
  });

  it('stores odd-but-legal keys under exactly their name, inside the root', async () => {
    for (const key of ODD_LEGAL_KEYS) {
      expect(await store.put(key, key)).toBe(true);
      expect(new TextDecoder().decode((await store.get(key))!)).toBe(key);
    }
    expect(await store.list('runs/')).toEqual([...ODD_LEGAL_KEYS].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
    expect(filesUnder(parent)).toEqual(['sentinel', ...ODD_LEGAL_KEYS.map((k) => `store/${k}`)].sort());
  });

  it('for any key string: refused, or written to a file inside the root that lists and reads back as that key', async () => {
    const { parent: p2, root: r2 } = watchedRoot();
    const fresh = new FsObjectStore(r2);
    const segment = fc.oneof(fc.constantFrom('..', '.', '', '.esopt-tmp', 'a', '%2e%2e', '\\', '\u0000', '~'), fc.string({ unit: 'grapheme', maxLength: 8 }));
    const key = fc.oneof(fc.array(segment, { minLength: 1, maxLength: 4 }).map((s) => s.join('/')), fc.string({ unit: 'binary', maxLength: 30 }));
    try {
      await fc.assert(
        fc.asyncProperty(key, async (k) => {
          let written: boolean;
          try {
            written = await fresh.put(k, 'v');
          } catch (err) {
            // Refused by the key rule, or by the filesystem (a name longer than it allows, a file where a directory must go): never elsewhere.
            expect((err as Error).message).toMatch(/invalid store key|ENAMETOOLONG|ENOTDIR|EISDIR|EEXIST/);
            return;
          }
          expect(written).toBe(true);
          const file = realpathSync(join(r2, ...k.split('/')));
          expect(file.startsWith(realpathSync(r2) + sep)).toBe(true);
          expect(new TextDecoder().decode((await fresh.get(k))!)).toBe('v');
          expect(await fresh.list(k)).toContain(k);
          await fresh.delete(k);
        }),
        { numRuns: 1000 },
      );
      expect(filesUnder(p2)).toEqual(['sentinel']);
    } finally {
      rmSync(p2, { recursive: true, force: true });
    }
  });
});

describe('the S3 store against s3rver', () => {
  let s3: LocalS3;
  let proxy: LoopbackProxy;
  let store: S3ObjectStore;
  beforeAll(async () => {
    s3 = await startLocalS3('esopt-key-injection');
    proxy = await startLoopbackProxy(s3.endpoint, () => null);
    store = new S3ObjectStore({ ...s3.storeConfig, endpoint: proxy.url });
  });
  afterAll(async () => {
    await proxy?.close();
    await s3?.close();
  });

  it('refuses every hostile key before a single request leaves the process', async () => {
    for (const key of HOSTILE_KEYS) {
      await expect(store.put(key, 'escaped'), JSON.stringify(key)).rejects.toThrow(/invalid store key/);
      await expect(store.put(key, 'escaped', { ifAbsent: true })).rejects.toThrow(/invalid store key/);
      await expect(store.get(key)).rejects.toThrow(/invalid store key/);
      await expect(store.delete(key)).rejects.toThrow(/invalid store key/);
    }
    for (const prefix of ['../', '/etc', 'runs/../..', 'a\\b']) await expect(store.list(prefix)).rejects.toThrow(/invalid store prefix/);
    expect(proxy.seen).toEqual([]);
  });

  it('stores odd-but-legal keys under exactly their name: nothing decoded into a path', async () => {
    for (const key of ODD_LEGAL_KEYS) {
      expect(await store.put(key, key)).toBe(true);
      expect(new TextDecoder().decode((await store.get(key))!)).toBe(key);
    }
    expect(await store.list('')).toEqual([...ODD_LEGAL_KEYS].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
    // "%2e%2e" travels percent-encoded once more, so the server sees the literal name, not "..".
    const put = proxy.seen.find((s) => s.method === 'PUT' && s.url.includes('%252e%252e'));
    expect(put).toBeDefined();
    expect(proxy.seen.every((s) => !/\/\.\.(\/|$)/.test(s.url.split('?')[0]))).toBe(true);
  });
});
