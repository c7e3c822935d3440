import { z } from 'zod';
import { Iteration, RunId } from './ids.ts';
import { ModelSpec } from './run-config.ts';

/** What `esopt export` writes: an ONNX model directory, or Hugging Face safetensors with config and tokenizer. */
export const ExportFormat = z.enum(['onnx', 'safetensors']);
export type ExportFormat = z.infer<typeof ExportFormat>;

/** A run's model at one iteration, written out (trainer/export/): where, which θ, and every file's size and digest. */
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
  mode: z.enum(['full', 'lowrank']),
  /** The checkpoint θ_K was replayed from (null: the model's θ_0), and the log entries replayed on it. */
  checkpoint: Iteration.nullable(),
  replayed: z.number().int().min(0),
  files: z.array(z.object({ path: z.string(), bytes: z.number().int().min(0), sha256: z.string().regex(/^[0-9a-f]{64}$/) })),
  /** Files of the model directory not carried over, with the reason. */
  skipped: z.array(z.object({ file: z.string(), why: z.string() })),
});
export type ExportSummary = z.infer<typeof ExportSummary>;
