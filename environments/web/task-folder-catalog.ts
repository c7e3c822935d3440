/**
 * Task folders in the store (`esopt tasks push DIR`), the model store's way: every file once under the sha256
 * of its bytes (create-only), a manifest listing them stored under its own sha256, and a name written last, so a
 * name never points at a folder that is not all there. A run or an evaluation is pinned to a manifest when it is
 * created (`pinTaskFolder`); an episode gets the folder onto its machine's disk by that hash alone
 * (`materializeTaskFolder`), each file checked against its hash — so no request ever names a path.
 */
import { createHash, randomBytes } from 'node:crypto';
import { lstat, mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative, sep } from 'node:path';
import { keys } from '../../shared/keys.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { NamedTaskFolder, TASK_FOLDER_LIMITS, TaskFolderManifest, TaskFolderName, TaskFolderPath, type TaskFolderFile, type TaskFolderRef } from '../../shared/schemas/index.ts';
import { readJson, writeJson } from '../../shared/store/json.ts';

const MINIWOB_PAGE = /^html\/miniwob\/([a-z0-9][a-z0-9-]{0,63})\.html$/;

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

/** Every regular file under `dir`, by its path inside it; a symbolic link is refused (it could point anywhere). */
async function walk(dir: string, root = dir, out: { path: string; full: string }[] = []): Promise<{ path: string; full: string }[]> {
  for (const entry of (await readdir(dir, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const full = join(dir, entry.name);
    if (entry.isSymbolicLink()) throw new Error(`${full} is a symbolic link: a pushed folder holds its files themselves`);
    if (entry.isDirectory()) await walk(full, root, out);
    else if (entry.isFile()) out.push({ path: relative(root, full).split(sep).join('/'), full });
    if (out.length > TASK_FOLDER_LIMITS.files) throw new Error(`more than ${TASK_FOLDER_LIMITS.files} files: push the folder's task pages and what they load, not a whole checkout`);
  }
  return out;
}

export function manifestBytes(manifest: TaskFolderManifest): Uint8Array {
  const m = TaskFolderManifest.parse(manifest);
  return new TextEncoder().encode(JSON.stringify({ layout: m.layout, files: m.files.map((f) => ({ path: f.path, sha256: f.sha256, bytes: f.bytes })), tasks: m.tasks }));
}

export interface PushedTaskFolder {
  record: NamedTaskFolder;
  /** Files written now; the rest were in the store already (equal bytes are stored once). */
  storedFiles: number;
}

/** Pushes a MiniWoB++-layout folder (`html/miniwob/<task>.html` beside what they load) under `name`. */
export async function pushTaskFolder(store: ObjectStore, name: string, dir: string, pushedAt = new Date(), progress?: (done: number, of: number) => void): Promise<PushedTaskFolder> {
  const checkedName = TaskFolderName.safeParse(name);
  if (!checkedName.success) throw new Error(`task folder name ${JSON.stringify(name)}: ${checkedName.error.issues[0]?.message}`);
  if (!(await stat(dir).catch(() => null))?.isDirectory()) throw new Error(`${dir} is not a folder`);
  const found = await walk(dir);
  const tasks = found.map((f) => MINIWOB_PAGE.exec(f.path)?.[1]).filter((t): t is string => t !== undefined).sort();
  if (tasks.length === 0) throw new Error(`${dir} has no html/miniwob/<task>.html: push a MiniWoB++-layout folder (the one that holds html/miniwob, html/core and html/common)`);
  let total = 0;
  const files: TaskFolderFile[] = [];
  let storedFiles = 0;
  for (const [i, f] of found.entries()) {
    const path = TaskFolderPath.safeParse(f.path);
    if (!path.success) throw new Error(`${f.path}: ${path.error.issues[0]?.message}`);
    const info = await lstat(f.full);
    if (info.size > TASK_FOLDER_LIMITS.fileBytes) throw new Error(`${f.path} is ${info.size} bytes, over the ${TASK_FOLDER_LIMITS.fileBytes} a served file may have`);
    total += info.size;
    if (total > TASK_FOLDER_LIMITS.totalBytes) throw new Error(`the folder is over ${TASK_FOLDER_LIMITS.totalBytes} bytes`);
    const bytes = new Uint8Array(await readFile(f.full));
    const hex = sha256(bytes);
    if (await store.put(keys.taskFolderBlob(hex), bytes, { ifAbsent: true })) storedFiles++;
    files.push({ path: f.path, sha256: hex, bytes: bytes.byteLength });
    progress?.(i + 1, found.length);
  }
  const body = manifestBytes({ layout: 'miniwob', files, tasks });
  const manifestSha256 = sha256(body);
  await store.put(keys.taskFolderManifest(manifestSha256), body, { ifAbsent: true, contentType: 'application/json' });
  const record = NamedTaskFolder.parse({ name, manifestSha256, files: files.length, bytes: total, tasks: tasks.length, pushedAt: pushedAt.toISOString() });
  await writeJson(store, keys.taskFolderName(name), record);
  return { record, storedFiles };
}

export function readNamedTaskFolder(store: Pick<ObjectStore, 'get'>, name: string): Promise<NamedTaskFolder | null> {
  return readJson(store, keys.taskFolderName(name), NamedTaskFolder);
}

export async function listNamedTaskFolders(store: ObjectStore): Promise<NamedTaskFolder[]> {
  const names = (await store.list(keys.taskFolderNames())).map((k) => /^task-folders\/names\/(.+)\.json$/.exec(k)?.[1]).filter((n): n is string => n !== undefined && TaskFolderName.safeParse(n).success);
  const records = await Promise.all(names.map((n) => readNamedTaskFolder(store, n)));
  return records.filter((r): r is NamedTaskFolder => r !== null);
}

/** The manifest stored under its sha256, checked against it; null when there is none. */
export async function readTaskFolderManifest(store: Pick<ObjectStore, 'get'>, hex: string): Promise<TaskFolderManifest | null> {
  const key = keys.taskFolderManifest(hex);
  const body = await store.get(key);
  if (body === null) return null;
  if (sha256(body) !== hex) throw new Error(`${key}: the stored manifest hashes to ${sha256(body)}, not to its key`);
  return TaskFolderManifest.parse(JSON.parse(new TextDecoder().decode(body)));
}

/** A folder reference the store cannot answer: `field` is where in the reference (`name` or `manifest`). */
export class UnknownTaskFolderError extends Error {
  constructor(
    readonly field: 'name' | 'manifest',
    message: string,
  ) {
    super(message);
  }
}

/** The manifest a reference means now: the one it pins, or the name's current one; with the folder's task names. */
export async function pinTaskFolder(store: Pick<ObjectStore, 'get'>, ref: TaskFolderRef): Promise<{ name: string; manifest: string; tasks: string[] }> {
  let manifest = ref.manifest;
  if (manifest === undefined) {
    const named = await readNamedTaskFolder(store, ref.name);
    if (!named) throw new UnknownTaskFolderError('name', `no task folder named ${ref.name} in the store: push it first (esopt tasks push DIR --name ${ref.name} --cloud)`);
    manifest = named.manifestSha256;
  }
  const stored = await readTaskFolderManifest(store, manifest);
  if (!stored) throw new UnknownTaskFolderError('manifest', `no task folder manifest ${manifest} in the store`);
  return { name: ref.name, manifest, tasks: stored.tasks };
}

const DEFAULT_ROOT = join(tmpdir(), 'esopt-task-folders');
const making = new Map<string, Promise<string>>();

/**
 * The folder pinned to `manifest` on this machine's disk (under `root`, once per process and machine): every
 * file fetched from the store and checked against its sha256, written to a scratch folder that is renamed into
 * place last, so a half-written folder is never served.
 */
export function materializeTaskFolder(store: Pick<ObjectStore, 'get'>, manifest: string, root = DEFAULT_ROOT): Promise<string> {
  const target = join(root, manifest);
  let pending = making.get(target);
  if (!pending) {
    pending = materialize(store, manifest, root, target);
    making.set(target, pending);
    pending.catch(() => making.delete(target));
  }
  return pending;
}

async function materialize(store: Pick<ObjectStore, 'get'>, manifest: string, root: string, target: string): Promise<string> {
  if (await stat(join(target, '.complete')).catch(() => null)) return target;
  const m = await readTaskFolderManifest(store, manifest);
  if (!m) throw new Error(`no task folder manifest ${manifest} in the store (the run was pinned to it; was it deleted?)`);
  const scratch = `${target}.${randomBytes(6).toString('hex')}.partial`;
  await mkdir(scratch, { recursive: true });
  try {
    for (const f of m.files) {
      const bytes = await store.get(keys.taskFolderBlob(f.sha256));
      if (!bytes) throw new Error(`task folder ${manifest}: the file ${f.path} (${f.sha256}) is missing from the store`);
      if (sha256(bytes) !== f.sha256) throw new Error(`task folder ${manifest}: the stored ${f.path} does not hash to ${f.sha256}`);
      const path = join(scratch, ...f.path.split('/'));
      await mkdir(dirname(path), { recursive: true });
      await writeFile(path, bytes);
    }
    await writeFile(join(scratch, '.complete'), manifest);
    await rename(scratch, target).catch(async (err: NodeJS.ErrnoException) => {
      // Another process on this machine put the same folder in place first: its copy is as good.
      if (!(await stat(join(target, '.complete')).catch(() => null))) throw err;
    });
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  return target;
}
