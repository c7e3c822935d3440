/**
 * A run's model exported at an iteration (`GET /runs/{id}/model`): the request, and the status the
 * exporter keeps beside the archive at `keys.modelExportStatus(run, k, format)`. The archive is a tarball of
 * the export directory (`esopt export`'s output), made once per (run, iteration, format) and kept.
 */
import { z } from 'zod';
import { Iteration, RunId } from './ids.ts';
import { ModelSpec } from './run-config.ts';

/** What `esopt export` writes: an ONNX model directory, or Hugging Face safetensors with config and tokenizer. */
export const ExportFormat = z.enum(['onnx', 'safetensors']);
export type ExportFormat = z.infer<typeof ExportFormat>;

export const ModelExportRequest = z
  .object({
    run: RunId,
    /** θ_k: the model after k updates. */
    iteration: Iteration,
    format: ExportFormat,
  })
  .strict();
export type ModelExportRequest = z.infer<typeof ModelExportRequest>;

export const ModelExportState = z.enum(['queued', 'exporting', 'ready', 'failed']);
export type ModelExportState = z.infer<typeof ModelExportState>;

export const ModelExportStatus = ModelExportRequest.extend({
  state: ModelExportState,
  requestedAt: z.iso.datetime(),
  updatedAt: z.iso.datetime(),
  /** The archive's size and SHA-256 (hex), once ready. */
  bytes: z.number().int().min(0).optional(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/).optional(),
  /** θ_k's hash (shared/theta-hash.ts), once ready. */
  thetaHash: z.string().optional(),
  error: z.string().max(4000).optional(),
}).strict();
export type ModelExportStatus = z.infer<typeof ModelExportStatus>;

/** The query of `GET /runs/{id}/model`. */
export const ModelExportQuery = z.object({
  iteration: z.coerce.number().pipe(Iteration).optional().describe('θ_k after k updates; default: the latest committed update'),
  format: ExportFormat.default('onnx'),
});

/** What `GET /runs/{id}/model` answers in JSON: the status, and where to download the archive once it is ready. */
export const ModelExportView = ModelExportStatus.extend({
  /** Where the archive downloads without the API's token (a presigned S3 URL), or this route itself locally. */
  url: z.string().optional(),
  /** When a presigned `url` stops working. */
  expiresAt: z.iso.datetime().optional(),
});
export type ModelExportView = z.infer<typeof ModelExportView>;

/** A run's model at one iteration, written out (trainer/training/export/): where, which θ, and every file's size and digest. */
export const ExportSummary = z.object({
  run: RunId,
  /** K: θ holds the updates of iterations 0 … K − 1. */
  iteration: Iteration,
  format: ExportFormat,
  out: z.string(),
  /** The θ hash of θ_K, as the log's thetaHashAfter of iteration K − 1 (the manifest's θ_0 for K = 0). */
  thetaHash: z.string(),
  /** The run's model, as its config names it. */
  model: ModelSpec,
  mode: z.enum(['full', 'lowrank', 'lora']),
  /** The checkpoint θ_K was replayed from (null: the model's θ_0), and the log entries replayed on it. */
  checkpoint: Iteration.nullable(),
  replayed: z.number().int().min(0),
  files: z.array(z.object({ path: z.string(), bytes: z.number().int().min(0), sha256: z.string().regex(/^[0-9a-f]{64}$/) })),
  /** Files of the model directory not carried over, with the reason. */
  skipped: z.array(z.object({ file: z.string(), why: z.string() })),
  /** LoRA runs: the directory under `out` holding θ_K's adapters in PEFT's layout (the model beside it is merged). */
  adapter: z.string().optional(),
});
export type ExportSummary = z.infer<typeof ExportSummary>;
