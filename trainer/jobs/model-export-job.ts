/**
 * Making one model archive (GET /runs/{id}/model): θ_k exported into a scratch directory, packed as a
 * tarball, stored at `keys.modelExportArchive`, and the export's status moved queued → exporting → ready
 * (with the archive's size and SHA-256) or failed (with the reason). The status is written last, so a
 * ready status always has its archive. The local API runs this in its own process; the trainer box runs
 * it for a queued export. While it is made, the `exporting` status is rewritten every `heartbeatMs`, so an
 * export whose maker died shows it (shared/stale-claim.ts); the heartbeat's last write is awaited before the
 * final status, which is therefore never overwritten by it.
 */
import { createHash } from 'node:crypto';
import { createReadStream, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create as createTar } from 'tar';
import { keys } from '../../shared/keys.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { readJson, writeJson } from '../../shared/store/json.ts';
import { ModelExportStatus, type ModelExportRequest } from '../../shared/schemas/index.ts';
import { exportModel } from '../training/export/export-model.ts';
import { CLAIM_HEARTBEAT_MS } from '../../shared/stale-claim.ts';

/** Writes θ_k of the request's run, in its format, as a model directory at `out`; θ_k's hash. */
export type ExportInto = (request: ModelExportRequest, out: string) => Promise<{ thetaHash: string }>;

/** `esopt export` over the store the request's run is in. */
export function exportFromStore(store: ObjectStore): ExportInto {
  return (request, out) => exportModel({ store, run: request.run, iteration: request.iteration, format: request.format, out });
}

async function sha256OfFile(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

async function writeStatus(store: ObjectStore, status: ModelExportStatus): Promise<void> {
  const key = keys.modelExportStatus(status.run, status.iteration, status.format);
  await writeJson(store, key, ModelExportStatus.parse(status));
}

export async function runModelExport(store: ObjectStore, request: ModelExportRequest, exportInto: ExportInto, heartbeatMs = CLAIM_HEARTBEAT_MS): Promise<ModelExportStatus> {
  // A previous status keeps its requestedAt; one that is not a status (but is JSON) is written over.
  const previous = await readJson(store, keys.modelExportStatus(request.run, request.iteration, request.format), { parse: (v) => ModelExportStatus.safeParse(v).data?.requestedAt });
  const requestedAt = previous ?? new Date().toISOString();
  const base = { ...request, requestedAt };
  await writeStatus(store, { ...base, state: 'exporting', updatedAt: new Date().toISOString() });
  let beating: Promise<void> = Promise.resolve();
  const beat = setInterval(() => {
    beating = beating.then(() => writeStatus(store, { ...base, state: 'exporting', updatedAt: new Date().toISOString() })).catch(() => {});
  }, heartbeatMs);
  const settle = async () => {
    clearInterval(beat);
    await beating;
  };
  const scratch = mkdtempSync(join(tmpdir(), 'esopt-model-export-'));
  try {
    const dir = join(scratch, 'model');
    const { thetaHash } = await exportInto(request, dir);
    const archive = join(scratch, 'model.tar');
    // portable: no uid, gid or user names of this machine in the archive
    await createTar({ file: archive, cwd: dir, portable: true }, readdirSync(dir).sort());
    const bytes = statSync(archive).size;
    const sha256 = await sha256OfFile(archive);
    await putArchive(store, keys.modelExportArchive(request.run, request.iteration, request.format), archive, sha256);
    const ready: ModelExportStatus = { ...base, state: 'ready', bytes, sha256, thetaHash, updatedAt: new Date().toISOString() };
    await settle();
    await writeStatus(store, ready);
    return ready;
  } catch (err) {
    const failed: ModelExportStatus = { ...base, state: 'failed', error: (err as Error).message.slice(0, 4000), updatedAt: new Date().toISOString() };
    await settle();
    await writeStatus(store, failed);
    return failed;
  } finally {
    clearInterval(beat);
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** Streamed, never held in memory (a model's archive can pass 2 GiB), its hash checked as it is sent. */
async function putArchive(store: ObjectStore, key: string, path: string, sha256: string): Promise<void> {
  await store.putFile(key, path, { contentType: 'application/x-tar', sha256 });
}
