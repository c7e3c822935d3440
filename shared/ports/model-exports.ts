/**
 * What the API hands a model export to (GET /runs/{id}/model). The route writes the export's status
 * (`queued`) first, so an exporter only needs the request: the local adapter makes the archive in this
 * process before resolving; a cloud deployment leaves a queue entry for the trainer box.
 */
import type { ModelExportRequest } from '../schemas/model-export.ts';

export interface ModelExports {
  start(request: ModelExportRequest): Promise<void>;
}

/** A URL that downloads an object without the API's token (S3 presigned); absent where the API serves the bytes itself. */
export type SignedDownload = (key: string, filename: string, expiresInSeconds: number) => Promise<string>;
