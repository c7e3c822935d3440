/**
 * A box's boot state as trainer/cloud/box/box-boot.sh writes it to the bucket (`keys.boxBoot(box)`) at each
 * step, when the service has started (`ready`) and when a step fails (`failed`, with the error): what
 * `esopt cloud status`, the Api's GET /boxes and the dashboard show. Its log lines have the token redacted.
 */
import { z } from 'zod';
import { Id } from './ids.ts';

/** The boot's steps in order, as the script names them. */
export const BOX_BOOT_STEPS = ['start', 'packages', 'node', 'artifact', 'unpack', 'dependencies', 'cuda', 'token', 'user', 'service', 'ready', 'update'] as const;

/**
 * Which artifact the boxes run (`keys.artifactPointer()`), written by each deploy: a box installs it at boot,
 * and the service, seeing it change, hands its run over at an iteration boundary and restarts into it.
 */
export const ArtifactPointer = z.object({
  key: z.string().regex(/^artifacts\/esopt-[0-9a-f]{64}\.tgz$/),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
});
export type ArtifactPointer = z.infer<typeof ArtifactPointer>;

export const BoxBootState = z.object({
  /** `trainer` or `replica-<i>`. */
  box: Id,
  step: z.enum(BOX_BOOT_STEPS),
  status: z.enum(['running', 'ready', 'failed']),
  at: z.iso.datetime(),
  error: z.string().optional(),
  /** The artifact the box installs (the deploy's `artifactSha256` output). */
  artifactSha256: z.string().regex(/^[0-9a-f]{64}$/),
  /** The boot log's last lines (at most 50). */
  log: z.array(z.string()).max(50),
});
export type BoxBootState = z.infer<typeof BoxBootState>;
