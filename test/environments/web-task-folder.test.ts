/**
 * MiniWoB++ folders pushed to the store (`esopt tasks push DIR`): every file by content, a manifest by its own
 * hash, the name last; pinned when a run or an evaluation is created; brought onto an episode's disk by the
 * manifest alone, each file checked — and played there, unmodified, to MiniWoB's own reward in Chromium.
 */
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ChatMessage, Policy } from '../../shared/ports/policy.ts';
import { runEpisode } from '../../environments/episode-runner.ts';
import { OptionsIssue } from '../../environments/environment.ts';
import { EMBEDDED_OUTBOUND } from '../../environments/outbound/address-policy.ts';
import { web } from '../../environments/web/definition.ts';
import { closeWebRuntime } from '../../environments/web/runtime.ts';
import { materializeTaskFolder, pushTaskFolder, readTaskFolderManifest } from '../../environments/web/task-folder-catalog.ts';
import { keys } from '../../shared/keys.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { main } from '../../trainer/cli/main.ts';

const FIXTURE = new URL('../fixtures/miniwob-protocol', import.meta.url).pathname;
const chromium = existsSync('/usr/bin/chromium') || Boolean(process.env.ESOPT_CHROMIUM);
const scratch = mkdtempSync(join(tmpdir(), 'esopt-folders-'));
afterAll(async () => {
  await closeWebRuntime();
  rmSync(scratch, { recursive: true, force: true });
});
let n = 0;
const fresh = () => join(scratch, `case-${n++}`);

describe('pushing a folder', () => {
  it('stores each file once by content and the name last; a second push of the same folder stores nothing new', async () => {
    const store = new FsObjectStore(fresh());
    const first = await pushTaskFolder(store, 'protocol', FIXTURE);
    expect(first.record).toMatchObject({ name: 'protocol', tasks: 4, files: 7 });
    expect(first.storedFiles).toBe(7);
    const manifest = (await readTaskFolderManifest(store, first.record.manifestSha256))!;
    expect(manifest.tasks).toEqual(['click-word', 'click-word-short', 'draw-circle', 'type-word']);
    expect(manifest.files.map((f) => f.path)).toContain('html/core/core.js');
    const again = await pushTaskFolder(store, 'protocol-again', FIXTURE);
    expect(again.storedFiles).toBe(0);
    expect(again.record.manifestSha256).toBe(first.record.manifestSha256);
  });

  it('refuses a folder without MiniWoB pages, one with a symbolic link, and a bad name', async () => {
    const store = new FsObjectStore(fresh());
    const empty = fresh();
    cpSync(join(FIXTURE, 'html', 'core'), join(empty, 'html', 'core'), { recursive: true });
    await expect(pushTaskFolder(store, 'x', empty)).rejects.toThrow(/has no html\/miniwob\/<task>\.html/);
    const linked = fresh();
    cpSync(FIXTURE, linked, { recursive: true });
    symlinkSync('/etc/passwd', join(linked, 'html', 'common', 'passwd'));
    await expect(pushTaskFolder(store, 'x', linked)).rejects.toThrow(/is a symbolic link/);
    await expect(pushTaskFolder(store, '../x', FIXTURE)).rejects.toThrow(/task folder name/);
    expect(await store.list('task-folders/names/')).toEqual([]);
  });
});

describe('pinning and bringing a folder onto disk', () => {
  it('pins a name to its manifest and task names; an unknown name or task is an issue at its field', async () => {
    const store = new FsObjectStore(fresh());
    const { record } = await pushTaskFolder(store, 'protocol', FIXTURE);
    const options = web.optionsSchema.parse({ miniwob: { folder: 'protocol' } });
    const pinned = await web.pinOptions!(options, store);
    expect(pinned.miniwob).toMatchObject({ folder: { name: 'protocol', manifest: record.manifestSha256 }, tasks: ['click-word', 'click-word-short', 'draw-circle', 'type-word'] });
    // Sampling needs no disk once pinned.
    expect(web.sampleTasks('eval', 3, 1, pinned).every((t) => 'miniwob' in t.task)).toBe(true);
    expect(() => web.sampleTasks('eval', 3, 1, options)).toThrow(/is not pinned/);
    const unknown = await web.pinOptions!(web.optionsSchema.parse({ miniwob: { folder: 'nope' } }), store).catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(OptionsIssue);
    expect(unknown).toMatchObject({ path: 'miniwob.folder.name', message: expect.stringMatching(/esopt tasks push DIR --name nope/) });
    const missingTask = await web.pinOptions!(web.optionsSchema.parse({ miniwob: { folder: 'protocol', tasks: ['click-word', 'book-flight'] } }), store).catch((e: unknown) => e);
    expect(missingTask).toMatchObject({ path: 'miniwob.tasks.1' });
    expect(web.optionsSchema.safeParse({ miniwob: { dir: '/x', folder: 'protocol' } }).success).toBe(false);
  });

  it('writes the files as pushed, checks every one against its hash, and never serves a half-written folder', async () => {
    const store = new FsObjectStore(fresh());
    const { record } = await pushTaskFolder(store, 'protocol', FIXTURE);
    const root = fresh();
    const dir = await materializeTaskFolder(store, record.manifestSha256, root);
    expect(readFileSync(join(dir, 'html', 'core', 'core.js'), 'utf8')).toBe(readFileSync(join(FIXTURE, 'html', 'core', 'core.js'), 'utf8'));
    // A file altered in the store is refused, and nothing is left in place for that manifest.
    const manifest = (await readTaskFolderManifest(store, record.manifestSha256))!;
    const core = manifest.files.find((f) => f.path === 'html/core/core.js')!;
    await store.put(keys.taskFolderBlob(core.sha256), new TextEncoder().encode('window.core = null;'));
    const other = fresh();
    await expect(materializeTaskFolder(store, record.manifestSha256, other)).rejects.toThrow(/does not hash to/);
    expect(existsSync(join(other, record.manifestSha256))).toBe(false);
  });
});

describe.skipIf(!chromium)('a pushed folder played in Chromium', () => {
  it('plays a task of the pinned folder to MiniWoB’s own reward, the folder read from the store', async () => {
    const store = new FsObjectStore(fresh());
    await pushTaskFolder(store, 'protocol', FIXTURE);
    const options = await web.pinOptions!(web.optionsSchema.parse({ backend: 'chromium', actionTimeoutMs: 10_000, miniwob: { folder: 'protocol', tasks: ['click-word'] } }), store);
    const clicksNamed: Policy = {
      async act(messages: ChatMessage[]) {
        const obs = String(messages.at(-1)!.content);
        const word = /Click the button "([a-z]+)"/.exec(obs)![1];
        return { text: `click ${new RegExp(`\\[(\\d+)\\] button "${word}"`).exec(obs)![1]}`, tokens: { prompt: 0, completion: 0 }, inferenceMs: 0 };
      },
    };
    const context = { outbound: EMBEDDED_OUTBOUND, allowCommands: false, store };
    const result = await runEpisode({ definition: web, task: { miniwob: 'click-word', seed: 4 }, options, policy: clicksNamed, seed: 1, context });
    expect(result.error).toBeNull();
    expect(result.reward).toBe(1);
    // Without the store the episode says why it cannot start.
    const storeless = await runEpisode({ definition: web, task: { miniwob: 'click-word', seed: 4 }, options, policy: clicksNamed, seed: 1, context: { outbound: EMBEDDED_OUTBOUND, allowCommands: false } });
    expect(storeless.error).toMatch(/read from the store, and this episode was given none/);
  }, 60_000);
});

describe('esopt tasks push DIR / list / show', () => {
  it('pushes, lists and shows a folder, --json included', async () => {
    const root = fresh();
    const out: string[] = [];
    const err: string[] = [];
    const io = { stdout: (t: string) => void out.push(t), stderr: (t: string) => void err.push(t), readStdin: async () => '' };
    expect(await main(['tasks', 'push', FIXTURE, '--name', 'protocol', '--store', root, '--json'], io)).toBe(0);
    const pushed = JSON.parse(out.pop()!);
    expect(pushed).toMatchObject({ name: 'protocol', tasks: 4, files: 7, storedFiles: 7, store: root });
    expect(await main(['tasks', 'list', '--store', root, '--json'], io)).toBe(0);
    expect(JSON.parse(out.pop()!)).toMatchObject({ suites: [], folders: [{ name: 'protocol', manifestSha256: pushed.manifestSha256 }] });
    expect(await main(['tasks', 'show', 'protocol', '--store', root], io)).toBe(0);
    expect(out.pop()).toMatch(/^task folder protocol \(web, miniwob.folder\).*\n.*\ntasks click-word click-word-short draw-circle type-word$/);
    expect(await main(['tasks', 'push', FIXTURE, '--name', 'p2', '--environment', 'sudoku', '--store', root], io)).not.toBe(0);
    expect(err.join('\n')).toMatch(/a folder of task pages is for the web environment/);
  });
});
