/**
 * An evaluation's endpoint key on a deployment that queues evaluations (docs/CLOUD.md, "Keyed
 * evaluations"): the key itself lives only in the secret store, bound to the one origin it may be sent
 * to; the queue entry and the episode events carry the secret's name.
 */
import { z } from 'zod';

/** An SSM parameter name as esopt writes them: `/`-separated segments, e.g. `/esopt/dev/eval-keys/eval-…`. */
export const SecretName = z
  .string()
  .max(1011)
  .regex(/^(\/[A-Za-z0-9_.-]+)+$/, 'a path of /-separated segments of letters, digits, _ . and -');
export type SecretName = z.infer<typeof SecretName>;

/** `scheme://host[:port]`, nothing else: what `new URL(x).origin` gives. */
export const Origin = z.url({ protocol: /^https?$/ }).refine((s) => new URL(s).origin === s, 'an origin: scheme://host[:port] without a path');

/** Where an evaluation's key is, and the origin it is for: no secret (the queue entry holds this). */
export const EvaluationKeyRef = z.object({ parameter: SecretName, origin: Origin }).strict();
export type EvaluationKeyRef = z.infer<typeof EvaluationKeyRef>;

/** The secret's value: the key and the origin it is bound to, written together by the Api function alone. */
export const EvaluationKeyBinding = z
  .object({
    apiKey: z.string().min(1).max(4096),
    origin: Origin,
  })
  .strict();
export type EvaluationKeyBinding = z.infer<typeof EvaluationKeyBinding>;
