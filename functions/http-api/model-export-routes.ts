/**
 * GET /runs/{id}/model: θ_k of a run as a model archive (a tarball of `esopt export`'s directory). The
 * first request for a (run, k, format) writes its status and hands it to the exporter (made here, before
 * the answer, by the local API; queued for the trainer box on a deployed stack, answered 202 until made);
 * once ready, a tarball client gets the bytes, or a redirect to a presigned S3 URL where the store signs
 * one, and a JSON client (Accept: application/json) gets the status with the download URL.
 */
import { createReadStream } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type { ReadableStream } from 'node:stream/web';
import { createRoute, z, type OpenAPIHono } from '@hono/zod-openapi';
import { keys } from '../../shared/keys.ts';
import { ContentMismatchError } from '../../shared/store/content-digest.ts';
import { STALE_CLAIM_MS } from '../../shared/stale-claim.ts';
import { IdParam, ModelExportQuery, ModelExportStatus, ModelExportView, type ModelExportRequest } from '../../shared/schemas/index.ts';
import type { ApiDeps } from './deps.ts';
import { ApiProblem, invalidProblem } from './errors.ts';
import { errors, json, secured } from './openapi-common.ts';
import { readCommittedUpdates, readConfig } from './run-reader.ts';
import { readJson, writeJson } from '../../shared/store/json.ts';

/** How long a presigned download URL works. */
const SIGNED_URL_SECONDS = 3600;
const RETRY_AFTER_SECONDS = 5;

const TarballQuery = ModelExportQuery.extend({
  retry: z.enum(['true', 'false']).optional().describe('make a failed export again, or one whose maker is gone (queued or exporting with no update for 10 minutes)'),
});

export function registerModelExportRoutes(app: OpenAPIHono, deps: ApiDeps): void {
  const { store } = deps;

  app.openapi(
    createRoute({
      method: 'get',
      path: '/runs/{id}/model',
      tags: ['runs'],
      security: secured,
      summary: "The run's model at an iteration, exported (a tarball; JSON status with Accept: application/json)",
      request: { params: IdParam, query: TarballQuery },
      responses: {
        200: {
          content: { 'application/x-tar': { schema: z.string().meta({ format: 'binary' }) }, 'application/json': { schema: ModelExportView } },
          description: 'The archive (or, asked for JSON, its status and where to download it)',
        },
        202: json(ModelExportView, 'The export is being made: ask again after Retry-After seconds'),
        302: { description: 'The archive, at a presigned S3 URL (deployed stack)' },
        400: errors[400],
        401: errors[401],
        404: errors[404],
        422: errors[422],
      },
    }),
    async (c) => {
      const { id } = c.req.valid('param');
      const query = c.req.valid('query');
      await readConfig(store, id);
      const committed = await readCommittedUpdates(store, id);
      const iteration = query.iteration ?? committed;
      if (iteration > committed) {
        throw invalidProblem([{ path: 'iteration', message: `run ${id} has committed ${committed} update${committed === 1 ? '' : 's'}: iteration must be 0…${committed}` }]);
      }
      const request: ModelExportRequest = { run: id, iteration, format: query.format };
      const statusKey = keys.modelExportStatus(id, iteration, query.format);
      let status = await readJson(store, statusKey, ModelExportStatus);
      if (!status || (query.retry === 'true' && (status.state === 'failed' || exportStale(status)))) status = await requestExport(deps, request, status !== null);

      const wantsJson = (c.req.header('accept') ?? '').includes('application/json');
      if (status.state === 'failed') throw new ApiProblem(422, 'export_failed', `exporting run ${id} at iteration ${iteration} as ${query.format} failed: ${status.error ?? 'no reason recorded'} (ask again with retry=true to try once more)`);
      if (status.state !== 'ready') {
        c.header('Retry-After', String(RETRY_AFTER_SECONDS));
        return c.json(status, 202);
      }
      const archiveKey = keys.modelExportArchive(id, iteration, query.format);
      const filename = `${id}-${iteration}-${query.format}.tar`;
      const signed = deps.signedDownload ? await deps.signedDownload(archiveKey, filename, SIGNED_URL_SECONDS) : undefined;
      if (wantsJson) {
        const url = signed ?? `/runs/${id}/model?iteration=${iteration}&format=${query.format}`;
        const view: ModelExportView = { ...status, url, ...(signed ? { expiresAt: new Date(Date.now() + SIGNED_URL_SECONDS * 1000).toISOString() } : {}) };
        return c.json(view, 200);
      }
      if (signed) return c.redirect(signed, 302);
      // Streamed from a scratch copy (an archive can pass 2 GiB), its SHA-256 checked on the way in.
      const scratch = await mkdtemp(join(tmpdir(), 'esopt-archive-'));
      const file = join(scratch, 'model.tar');
      const drop = () => void rm(scratch, { recursive: true, force: true });
      try {
        if (!(await store.getToFile(archiveKey, file, { sha256: status.sha256 }))) throw new ApiProblem(404, 'not_found', `the archive of run ${id} at iteration ${iteration} (${query.format}) is missing from the store though its status says ready`);
      } catch (err) {
        drop();
        if (!(err instanceof ContentMismatchError)) throw err;
        // A stored archive that no longer hashes as its status says: the export is failed, so a retry makes it again.
        const error = `the stored archive does not match its SHA-256 (${err.message})`;
        await writeJson(store, keys.modelExportStatus(id, iteration, query.format), { ...status, state: 'failed', error, updatedAt: new Date().toISOString() });
        throw new ApiProblem(422, 'export_failed', `run ${id} at iteration ${iteration} as ${query.format}: ${error} (ask again with retry=true to make it again)`);
      }
      const stream = createReadStream(file);
      stream.once('close', drop);
      return c.body(Readable.toWeb(stream) as ReadableStream<Uint8Array>, 200, {
        'Content-Type': 'application/x-tar',
        'Content-Disposition': `attachment; filename="${filename}"`,
        'Content-Length': String((await stat(file)).size),
      });
    },
  );
}

/**
 * An export `queued` or `exporting` whose status has not changed for STALE_CLAIM_MS: its maker rewrites it
 * every minute while it works (trainer/jobs/model-export-job.ts), so one that went silent is gone, or its
 * entry was lost (shared/stale-claim.ts).
 */
function exportStale(status: ModelExportStatus, now = Date.now()): boolean {
  return (status.state === 'queued' || status.state === 'exporting') && now - Date.parse(status.updatedAt) > STALE_CLAIM_MS;
}

/** Writes the export's status (`queued`) and hands it to the exporter; the status as it stands after. */
async function requestExport(deps: ApiDeps, request: ModelExportRequest, again: boolean): Promise<ModelExportStatus> {
  const key = keys.modelExportStatus(request.run, request.iteration, request.format);
  const now = new Date().toISOString();
  const queued: ModelExportStatus = { ...request, state: 'queued', requestedAt: now, updatedAt: now };
  // Create-only the first time: of two first requests, one queues the work and the other reads its status.
  if (await writeJson(deps.store, key, queued, !again)) {
    try {
      await deps.exports.start(request);
    } catch (err) {
      const failed: ModelExportStatus = { ...queued, state: 'failed', error: (err as Error).message.slice(0, 4000), updatedAt: new Date().toISOString() };
      await writeJson(deps.store, key, failed);
      return failed;
    }
  }
  const status = await readJson(deps.store, key, ModelExportStatus);
  if (!status) throw new Error(`${key} vanished after it was written`);
  return status;
}
