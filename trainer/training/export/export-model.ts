/**
 * `exportModel`: a run's fine-tuned model out of the system. θ_K is rebuilt from the run's store
 * (theta-at-iteration.ts) and written as an ONNX model directory (onnx-export.ts) or as Hugging Face
 * safetensors (safetensors-export.ts); the summary names every file with its size and sha256. The
 * directory is written beside `out` under a process-unique name and renamed into place, so a failed
 * export leaves nothing that looks whole. The CLI (`esopt export`) and an HTTP route call this.
 */
import { createHash } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readSync, renameSync, rmdirSync, rmSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import { ExportFormat, type ExportSummary } from '../../../shared/schemas/index.ts';
import { writeOnnxExport } from './onnx-export.ts';
import { writeSafetensorsExport } from './safetensors-export.ts';
import { thetaAtIteration } from './theta-at-iteration.ts';
import { ADAPTER_DIR, writeRunAdapter } from './run-adapter.ts';

export interface ExportOptions {
  store: ObjectStore;
  run: string;
  /** K; default the latest iteration the run's log holds. */
  iteration?: number;
  /** The directory to write; it must not exist, or be empty. */
  out: string;
  format?: ExportFormat;
  /** Steps of a long export, as they start. */
  onProgress?: (message: string) => void;
}

export async function exportModel(options: ExportOptions): Promise<ExportSummary> {
  const format = ExportFormat.parse(options.format ?? 'onnx');
  const out = resolve(options.out);
  if (existsSync(out) && (!statSync(out).isDirectory() || readdirSync(out).length > 0)) throw new Error(`${out} exists and is not an empty directory; export into a new one`);
  const say = options.onProgress ?? (() => {});
  say(`restoring θ of run ${options.run}${options.iteration === undefined ? ' at its latest iteration' : ` at iteration ${options.iteration}`}`);
  const theta = await thetaAtIteration(options.store, options.run, options.iteration);
  say(`θ_${theta.iteration} (${theta.thetaHash}): ${theta.checkpoint === null ? 'θ_0' : `checkpoint ${theta.checkpoint}`} + ${theta.replayed} log entries`);
  const partial = `${out}.partial-${process.pid}`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  try {
    say(`writing ${format} into ${out}`);
    const written = format === 'onnx' ? writeOnnxExport(theta.model, theta.config.model, partial) : writeSafetensorsExport(theta.model, theta.config.model, partial);
    // a LoRA run: the model above is merged; its adapters go beside it as PEFT loads them
    let adapter: string | undefined;
    if (theta.lora) {
      say(`writing the adapters in PEFT's layout into ${join(out, ADAPTER_DIR)}`);
      const made = writeRunAdapter(join(partial, ADAPTER_DIR), theta.model, theta.config.model, theta.lora, theta.config.lora!.alpha);
      if (made.written) adapter = ADAPTER_DIR;
      else written.skipped.push({ file: ADAPTER_DIR, why: made.why });
    }
    say('hashing the files');
    const files = listFiles(partial).map((path) => ({ path: relative(partial, path), ...digest(path) }));
    if (existsSync(out)) rmdirSync(out);
    renameSync(partial, out);
    return {
      run: options.run,
      iteration: theta.iteration,
      format,
      out,
      thetaHash: theta.thetaHash,
      model: theta.config.model,
      mode: theta.config.mode,
      checkpoint: theta.checkpoint,
      replayed: theta.replayed,
      files,
      skipped: written.skipped,
      ...(adapter ? { adapter } : {}),
    };
  } catch (err) {
    rmSync(partial, { recursive: true, force: true });
    throw err;
  }
}

function listFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .sort((a, b) => (a.name < b.name ? -1 : 1))
    .flatMap((e) => (e.isDirectory() ? listFiles(join(dir, e.name)) : [join(dir, e.name)]));
}

/** Size and sha256 of a file, read in chunks. */
function digest(path: string): { bytes: number; sha256: string } {
  const hash = createHash('sha256');
  const chunk = Buffer.alloc(16 * 2 ** 20);
  const fd = openSync(path, 'r');
  let bytes = 0;
  try {
    for (let n; (n = readSync(fd, chunk, 0, chunk.length, null)) > 0; bytes += n) hash.update(chunk.subarray(0, n));
  } finally {
    closeSync(fd);
  }
  return { bytes, sha256: hash.digest('hex') };
}
