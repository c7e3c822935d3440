/**
 * The model store's records (layout in shared/keys.ts): a pushed model is a manifest of its files, each
 * stored once as a blob under its content's sha256; a name points at one manifest. The manifest's own
 * sha256 (of its canonical bytes, shared/model-catalog.ts) is what a run pins, so re-pushing a name
 * never changes the θ₀ of a run that named it.
 */
import { z } from 'zod';
import { Id } from './ids.ts';

/** A pushed model's name: an id, so it is a safe key segment. */
export const ModelName = Id.describe('model name');
export type ModelName = z.infer<typeof ModelName>;

export const Sha256 = z.string().regex(/^[0-9a-f]{64}$/, 'must be a sha256: 64 lowercase hex digits');

/** A file's path inside its model directory: relative, `/`-separated, no empty, `.` or `..` segments. */
export const ModelFilePath = z
  .string()
  .min(1)
  .max(1024)
  .refine((p) => !/[\\\0]/.test(p) && p.split('/').every((s) => s !== '' && s !== '.' && s !== '..'), 'must be a relative path with "/" separators and no empty, "." or ".." segments');

export const ModelFile = z
  .object({
    path: ModelFilePath,
    bytes: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
    sha256: Sha256,
  })
  .strict();
export type ModelFile = z.infer<typeof ModelFile>;

/** Every file of a model directory, sorted by path (code units), each once: so equal directories have equal manifests. */
export const ModelManifest = z
  .object({ files: z.array(ModelFile).min(1).max(100_000) })
  .strict()
  .superRefine((m, ctx) => {
    const paths = new Set(m.files.map((f) => f.path));
    m.files.forEach((f, i) => {
      const before = m.files[i - 1]?.path;
      if (before !== undefined && !(before < f.path)) ctx.addIssue({ code: 'custom', path: ['files', i, 'path'], message: `files must be sorted by path, each once (${JSON.stringify(f.path)} after ${JSON.stringify(before)})` });
      const segments = f.path.split('/');
      for (let n = 1; n < segments.length; n++) {
        const parent = segments.slice(0, n).join('/');
        if (paths.has(parent)) ctx.addIssue({ code: 'custom', path: ['files', i, 'path'], message: `${JSON.stringify(parent)} is a file, so ${JSON.stringify(f.path)} cannot be inside it` });
      }
    });
  });
export type ModelManifest = z.infer<typeof ModelManifest>;

/** `models/names/{name}.json`: the manifest a name points at now, with the manifest's own sha256. */
export const NamedModel = z
  .object({
    name: ModelName,
    manifestSha256: Sha256,
    manifest: ModelManifest,
    pushedAt: z.iso.datetime(),
  })
  .strict();
export type NamedModel = z.infer<typeof NamedModel>;

/** `models/pushes/{push}.json`: a push under way, written before it looks for or sends any blob, deleted once its name is written. */
export const ModelPushRecord = z
  .object({
    startedAt: z.iso.datetime(),
    /** The blobs the push will name: a prune within its grace period keeps them, sent or found already stored. */
    blobs: z.array(Sha256),
  })
  .strict();
export type ModelPushRecord = z.infer<typeof ModelPushRecord>;
