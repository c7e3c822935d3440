/**
 * An evaluation's endpoint key through the SecretStore: the Api function stores it bound to the
 * endpoint's origin under `<path>/<evaluation id>`, the Episode function reads it and sends it to that
 * origin alone, and the trainer box deletes it when the evaluation ends. What goes wrong with it is an
 * EvaluationKeyError, whose message starts with EVALUATION_KEY_ERROR: the runner fails the whole
 * evaluation on it instead of playing every episode into the same wall.
 */
import type { SecretStore } from '../ports/secret-store.ts';
import { EvaluationKeyBinding, EvaluationKeyRef, SecretName } from '../schemas/evaluation-key.ts';

/** How long a stored key may outlive a crash of everything that should delete it (the parameter's Expiration). */
export const EVALUATION_KEY_LIFETIME_MS = 72 * 3600_000;

export const EVALUATION_KEY_ERROR = 'evaluation key:';

export class EvaluationKeyError extends Error {
  constructor(message: string) {
    super(`${EVALUATION_KEY_ERROR} ${message}`);
    this.name = 'EvaluationKeyError';
  }
}

export function evaluationKeyName(path: string, evaluation: string): string {
  return SecretName.parse(`${SecretName.parse(path)}/${evaluation}`);
}

/** Stores the key for `baseUrl`'s origin; the reference is what may be written anywhere. */
export async function storeEvaluationKey(secrets: SecretStore, path: string, evaluation: string, apiKey: string, baseUrl: string, now = new Date()): Promise<EvaluationKeyRef> {
  const ref = EvaluationKeyRef.parse({ parameter: evaluationKeyName(path, evaluation), origin: new URL(baseUrl).origin });
  const binding: EvaluationKeyBinding = EvaluationKeyBinding.parse({ apiKey, origin: ref.origin });
  if (!(await secrets.create(ref.parameter, JSON.stringify(binding), new Date(now.getTime() + EVALUATION_KEY_LIFETIME_MS)))) {
    throw new Error(`the secret ${ref.parameter} exists already`);
  }
  return ref;
}

/**
 * The key from the secret's `value` (null: there is none), once every URL it would be sent to is on the
 * origin it was stored for; an EvaluationKeyError when the secret is gone (deleted when its evaluation
 * ended, or expired) or bound elsewhere.
 */
export function evaluationKeyFrom(parameter: string, value: string | null, urls: string[]): string {
  if (value === null) throw new EvaluationKeyError(`${parameter} does not exist: it is deleted when its evaluation ends and expires ${EVALUATION_KEY_LIFETIME_MS / 3600_000} h after it was queued`);
  let binding: EvaluationKeyBinding;
  try {
    binding = EvaluationKeyBinding.parse(JSON.parse(value));
  } catch {
    // Never the value in the message: it is the key.
    throw new EvaluationKeyError(`${parameter} does not hold an esopt evaluation key`);
  }
  for (const url of urls) {
    const origin = new URL(url).origin;
    if (origin !== binding.origin) throw new EvaluationKeyError(`refusing to send the key in ${parameter} to ${origin}: it is only for ${binding.origin}`);
  }
  return binding.apiKey;
}
