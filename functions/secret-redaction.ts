/**
 * Takes a secret out of everything an episode produced before it is stored or logged: a server may echo
 * the key it was sent (an error body, a reply), and nothing an episode writes may carry it. The secret is
 * replaced in every string, as itself and in base64 and base64url.
 */
import type { EpisodeResult } from '../environments/episode-runner.ts';

export const REDACTED = '[redacted]';

export function redactSecret(result: EpisodeResult, secret: string): EpisodeResult {
  const forms = [secret, Buffer.from(secret).toString('base64'), Buffer.from(secret).toString('base64url')];
  const clean = (text: string) => forms.reduce((t, form) => t.split(form).join(REDACTED), text);
  return JSON.parse(JSON.stringify(result), (_key, value: unknown) => (typeof value === 'string' ? clean(value) : value)) as EpisodeResult;
}
