/**
 * The key of an endpoint a request's environment names (an OpenEnv server, a rollout agent, an MCP server)
 * comes in the `X-Esopt-Environment-Key` header, never in the body: bodies are stored, headers are not. On a
 * deployed stack the API puts it in the secret store bound to that endpoint's origin (shared/secrets/
 * evaluation-key.ts, under the stage's key path, expiring like an evaluation's key) and stores the secret's
 * name as `environment.keyParameter`; the Episode function reads it and sends it to that origin alone. The
 * local API keeps no secrets: there the key comes from the user's shell (`environment.keyEnv`, config files).
 */
import { randomBytes } from 'node:crypto';
import type { SecretStore } from '../../shared/ports/secret-store.ts';
import { storeEvaluationKey } from '../../shared/secrets/evaluation-key.ts';
import type { FieldIssue } from '../../shared/validation.ts';
import { endpointUrls } from '../../environments/outbound/endpoint-urls.ts';

export const ENVIRONMENT_KEY_HEADER = 'x-esopt-environment-key';
const HEADER_PATH = `headers.${ENVIRONMENT_KEY_HEADER}`;

/** Where the API keeps endpoint keys (the deployed stack's secret store and the stage's key path). */
export interface EndpointKeyStore {
  secrets: SecretStore;
  path: string;
}

export type EnvironmentKeyResult = { ok: true; keyParameter?: string; discard(): Promise<void> } | { ok: false; issues: FieldIssue[] };

/** Stores the header's key (when given) for the one endpoint origin the environment's options name. */
export async function storeEnvironmentKey(apiKey: string | undefined, environment: { options?: unknown }, keys: EndpointKeyStore | undefined): Promise<EnvironmentKeyResult> {
  const none = { ok: true as const, discard: async () => {} };
  if (apiKey === undefined) return none;
  if (!keys) return { ok: false, issues: [{ path: HEADER_PATH, message: 'the local API keeps no secrets: give the key in a config file run (esopt train) as environment.keyEnv, the variable holding it' }] };
  if (apiKey.length === 0 || apiKey.length > 4096) return { ok: false, issues: [{ path: HEADER_PATH, message: 'a key of 1 to 4096 characters' }] };
  const origins = [...new Set(endpointUrls(environment.options, 'environment.options').map((f) => new URL(f.url).origin))];
  if (origins.length === 0) return { ok: false, issues: [{ path: HEADER_PATH, message: "the environment's options name no endpoint url to send the key to" }] };
  if (origins.length > 1) return { ok: false, issues: [{ path: HEADER_PATH, message: `one key serves one origin; the options name ${origins.join(', ')}` }] };
  const ref = await storeEvaluationKey(keys.secrets, keys.path, `env-${randomBytes(12).toString('hex')}`, apiKey, origins[0]!);
  return { ok: true, keyParameter: ref.parameter, discard: () => keys.secrets.delete(ref.parameter).then(() => undefined) };
}
