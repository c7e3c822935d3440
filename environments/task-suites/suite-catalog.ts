/**
 * The task suite store's catalog, the model store's way (shared/model-catalog.ts): a suite is stored once
 * under the sha256 of its canonical bytes (create-only: equal suites are one object), a name points at it,
 * and the name is written last, so a name never points at a suite that is not there. Both the API (to pin a
 * request's suite) and the trainer (to push, list and sample) read it through here.
 */
import { createHash } from 'node:crypto';
import { keys, parseSuiteNameKey } from '../../shared/keys.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { NamedTaskSuite, Sha256, TaskSuite } from '../../shared/schemas/index.ts';
import { readJson, writeJson } from '../../shared/store/json.ts';
import { splitCounts } from './suite-splits.ts';

const decoder = new TextDecoder();

/** The canonical bytes: `{"environment":…,"tasks":[…]}`, tasks in file order, no spaces. */
export function suiteBytes(suite: TaskSuite): Uint8Array {
  const checked = TaskSuite.parse(suite);
  return new TextEncoder().encode(JSON.stringify({ environment: checked.environment, tasks: checked.tasks }));
}

export function suiteSha256(suite: TaskSuite): string {
  return createHash('sha256').update(suiteBytes(suite)).digest('hex');
}

/** The suite stored under its sha256, checked against it; null when there is none. */
export async function readSuite(store: Pick<ObjectStore, 'get'>, sha256: string): Promise<TaskSuite | null> {
  const key = keys.suiteManifest(sha256);
  const body = await store.get(key);
  if (body === null) return null;
  const actual = createHash('sha256').update(body).digest('hex');
  if (actual !== sha256) throw new Error(`${key}: the stored suite hashes to ${actual}, not to its key`);
  return TaskSuite.parse(JSON.parse(decoder.decode(body)));
}

export function readNamedSuite(store: Pick<ObjectStore, 'get'>, name: string): Promise<NamedTaskSuite | null> {
  return readJson(store, keys.suiteName(name), NamedTaskSuite);
}

export async function listNamedSuites(store: ObjectStore): Promise<NamedTaskSuite[]> {
  const names = (await store.list(keys.suiteNames())).map(parseSuiteNameKey).filter((n): n is string => n !== null);
  const records = await Promise.all(names.map((n) => readNamedSuite(store, n)));
  return records.filter((r): r is NamedTaskSuite => r !== null);
}

export interface PublishedSuite {
  record: NamedTaskSuite;
  /** False when a suite of these exact bytes was in the store already. */
  stored: boolean;
}

/** Stores the suite under its sha256 (create-only), then points `name` at it. */
export async function publishSuite(store: ObjectStore, name: string, suite: TaskSuite, pushedAt = new Date()): Promise<PublishedSuite> {
  const sha = suiteSha256(suite);
  const stored = await store.put(keys.suiteManifest(sha), suiteBytes(suite), { ifAbsent: true, contentType: 'application/json' });
  const record = NamedTaskSuite.parse({ name, environment: suite.environment, manifestSha256: sha, tasks: suite.tasks.length, splits: splitCounts(suite.tasks), pushedAt: pushedAt.toISOString() });
  await writeJson(store, keys.suiteName(name), record);
  return { record, stored };
}

/** A suite reference that cannot be pinned: `field` is `name` or `manifest`, relative to the reference. */
export class UnknownSuiteError extends Error {
  constructor(
    readonly field: 'name' | 'manifest',
    message: string,
  ) {
    super(message);
    this.name = 'UnknownSuiteError';
  }
}

export interface PinnedSuite {
  name: string;
  manifest: string;
  environment: string;
  /** How many tasks each split of the pinned manifest holds: what a request may ask of it. */
  splits: NamedTaskSuite['splits'];
}

/**
 * A suite reference pinned to a manifest: a given sha256 must be in the store, else the name's current one
 * is taken. What a run or an evaluation stores, so a re-push of the name never changes its tasks.
 */
export async function pinSuiteName(store: Pick<ObjectStore, 'get'>, ref: { name: string; manifest?: string }): Promise<PinnedSuite> {
  if (ref.manifest !== undefined) {
    if (!Sha256.safeParse(ref.manifest).success) throw new UnknownSuiteError('manifest', `${JSON.stringify(ref.manifest)} is not a sha256`);
    const suite = await readSuite(store, ref.manifest);
    if (suite === null) throw new UnknownSuiteError('manifest', `no task suite ${ref.manifest} in the store (esopt tasks show ${ref.name} names the current one)`);
    return { name: ref.name, manifest: ref.manifest, environment: suite.environment, splits: splitCounts(suite.tasks) };
  }
  const record = await readNamedSuite(store, ref.name);
  if (!record) throw new UnknownSuiteError('name', `no task suite named ${JSON.stringify(ref.name)} in the store: push it first (esopt tasks push FILE.jsonl --name ${ref.name} --environment ENV)`);
  return { name: ref.name, manifest: record.manifestSha256, environment: record.environment, splits: record.splits };
}
