/**
 * The instructions' catalog, the task suites' and the model store's way: the documents are stored once
 * under the sha256 of their canonical bytes (create-only: equal instructions are one object), a name points
 * at them and is written last, so a name never points at documents that are not there. The API (to pin a
 * request's instructions), the trainer (to push, list and resolve them) and the CLI read it through here.
 */
import { createHash } from 'node:crypto';
import { keys, parseInstructionsNameKey } from './keys.ts';
import type { ObjectStore } from './ports/object-store.ts';
import { Instructions, NamedInstructions, Sha256, type EpisodeInstructions, type InstructionsInput, type PinnedInstructions } from './schemas/index.ts';
import { formatIssues } from './validation.ts';
import { readJson, writeJson } from './store/json.ts';

const decoder = new TextDecoder();

/** The canonical bytes: `{"system"?:…,"skills":[{name,text}…]}` in that key order, skills in the pushed order, no spaces. */
export function instructionsBytes(documents: InstructionsInput): Uint8Array {
  const checked = Instructions.safeParse(documents);
  if (!checked.success) throw new Error(`invalid instructions: ${formatIssues(checked.error)}`);
  const { system, skills } = checked.data;
  return new TextEncoder().encode(JSON.stringify({ ...(system !== undefined ? { system } : {}), skills: skills.map(({ name, text }) => ({ name, text })) }));
}

export function instructionsSha256(documents: InstructionsInput): string {
  return createHash('sha256').update(instructionsBytes(documents)).digest('hex');
}

/** The documents stored under their sha256, checked against it; null when there are none. */
export async function readInstructions(store: Pick<ObjectStore, 'get'>, sha256: string): Promise<Instructions | null> {
  const key = keys.instructionsManifest(sha256);
  const body = await store.get(key);
  if (body === null) return null;
  const actual = createHash('sha256').update(body).digest('hex');
  if (actual !== sha256) throw new Error(`${key}: the stored instructions hash to ${actual}, not to their key`);
  return Instructions.parse(JSON.parse(decoder.decode(body)));
}

export function readNamedInstructions(store: Pick<ObjectStore, 'get'>, name: string): Promise<NamedInstructions | null> {
  return readJson(store, keys.instructionsName(name), NamedInstructions);
}

export async function listNamedInstructions(store: ObjectStore): Promise<NamedInstructions[]> {
  const names = (await store.list(keys.instructionsNames())).map(parseInstructionsNameKey).filter((n): n is string => n !== null);
  const records = await Promise.all(names.map((n) => readNamedInstructions(store, n)));
  return records.filter((r): r is NamedInstructions => r !== null);
}

export interface PublishedInstructions {
  record: NamedInstructions;
  /** False when instructions of these exact bytes were in the store already. */
  stored: boolean;
}

/** Stores the documents under their sha256 (create-only), then points `name` at them. */
export async function publishInstructions(store: ObjectStore, name: string, documents: InstructionsInput, pushedAt = new Date()): Promise<PublishedInstructions> {
  const body = instructionsBytes(documents);
  const sha = createHash('sha256').update(body).digest('hex');
  const stored = await store.put(keys.instructionsManifest(sha), body, { ifAbsent: true, contentType: 'application/json' });
  const parsed = Instructions.parse(documents);
  const record = NamedInstructions.parse({
    name,
    manifestSha256: sha,
    systemBytes: Buffer.byteLength(parsed.system ?? '', 'utf8'),
    skills: parsed.skills.map((s) => s.name),
    pushedAt: pushedAt.toISOString(),
  });
  await writeJson(store, keys.instructionsName(name), record);
  return { record, stored };
}

/** A reference that cannot be pinned: `field` is `name` or `manifest`, relative to the reference. */
export class UnknownInstructionsError extends Error {
  constructor(
    readonly field: 'name' | 'manifest',
    message: string,
  ) {
    super(message);
    this.name = 'UnknownInstructionsError';
  }
}

/** A reference pinned to a manifest: a given sha256 must be in the store, else the name's current one is taken. */
export async function pinInstructionsName(store: Pick<ObjectStore, 'get'>, ref: { name: string; manifest?: string }): Promise<PinnedInstructions> {
  if (ref.manifest !== undefined) {
    if (!Sha256.safeParse(ref.manifest).success) throw new UnknownInstructionsError('manifest', `${JSON.stringify(ref.manifest)} is not a sha256`);
    if ((await readInstructions(store, ref.manifest)) === null) throw new UnknownInstructionsError('manifest', `no instructions ${ref.manifest} in the store (esopt instructions show ${ref.name} names the current ones)`);
    return { name: ref.name, manifest: ref.manifest };
  }
  const record = await readNamedInstructions(store, ref.name);
  if (!record) throw new UnknownInstructionsError('name', `no instructions named ${JSON.stringify(ref.name)} in the store: push them first (esopt instructions push SYSTEM.md --name ${ref.name})`);
  return { name: ref.name, manifest: record.manifestSha256 };
}

/** Pinned instructions with their documents, as an episode request carries them; a missing manifest is an error. */
export async function resolveInstructions(store: Pick<ObjectStore, 'get'>, pinned: PinnedInstructions): Promise<EpisodeInstructions> {
  const documents = await readInstructions(store, pinned.manifest);
  if (!documents) throw new Error(`instructions.manifest: no instructions ${pinned.manifest} in the store (${pinned.name} was pinned to them)`);
  return { name: pinned.name, manifest: pinned.manifest, documents };
}
