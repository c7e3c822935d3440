/** What `sst deploy` writes to .sst/outputs.json (sst.config.ts's return value), as the cloud commands read it. */
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { UsageError } from './usage-error.ts';

export const StackOutputs = z.object({
  bucket: z.string().min(3).optional(),
  apiUrl: z.url().optional(),
  trainerUrl: z.url().optional(),
  episodeFunction: z.string().min(1).optional(),
  replicaUrls: z.array(z.url()).optional(),
  artifactSha256: z.string().optional(),
  boxLogGroup: z.string().min(1).optional(),
  episodeLogGroup: z.string().min(1).optional(),
  apiLogGroup: z.string().min(1).optional(),
});
export type StackOutputs = z.infer<typeof StackOutputs>;

export const DEFAULT_OUTPUTS = '.sst/outputs.json';

/** The outputs at `path`, or at the default path if it exists (none there is `{}`; a named file must exist). */
export async function readStackOutputs(path: string | undefined): Promise<StackOutputs> {
  const file = path ?? DEFAULT_OUTPUTS;
  const text = await readFile(file, 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT' && path === undefined) return null;
    throw new UsageError(`--outputs ${file}: ${err.message}`);
  });
  if (text === null) return {};
  const parsed = StackOutputs.safeParse(JSON.parse(text));
  if (!parsed.success) throw new UsageError(`${file} is not the stack's outputs: ${parsed.error.issues[0]?.path.join('.')}: ${parsed.error.issues[0]?.message}`);
  return parsed.data;
}
