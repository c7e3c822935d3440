/**
 * What an API request may not choose. On a deployed stack no request names a program to run or a path on
 * a machine's disk: the Episode function would launch a web option's `executablePath` with its role's
 * credentials in its environment, and the trainer box would open a model `dir` wherever it points (the
 * models/ directories the tree ships included: a model reaches the stack by `esopt models push`, and is
 * named as `{ name }`). And anywhere, an endpoint key only travels over https (a loopback address
 * excepted: it never leaves the host), and no request starts a local program: a `command` in environment
 * options (a rollout agent's, an MCP server's stdio) comes only from a run config file on the user's machine.
 */
import type { EvaluationModel, ModelSpec } from '../../shared/schemas/index.ts';
import type { FieldIssue } from '../../shared/validation.ts';
import { endpointUrls } from '../../environments/outbound/endpoint-urls.ts';
import { checkUrl, EMBEDDED_OUTBOUND, OutboundError, outboundPolicyFromEnv, PUBLIC_ONLY, type OutboundPolicy } from '../../environments/outbound/address-policy.ts';

/** The environment options that name a program or a path, per environment (a dotted path into the options). */
const HOST_OPTIONS: Record<string, string[]> = { web: ['executablePath', 'miniwob.dir'] };

function at(options: unknown, path: string): unknown {
  return path.split('.').reduce<unknown>((v, k) => (v !== null && typeof v === 'object' ? (v as Record<string, unknown>)[k] : undefined), options);
}

const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/i;

export function isLoopbackUrl(url: string): boolean {
  return LOOPBACK.test(new URL(url).hostname);
}

export interface RequestChoiceInput {
  environment: { name: string; options?: unknown; keyEnv?: string; keyParameter?: string };
  /** A run's model (at `model`), or an evaluation's (a base model's spec at `model.model`). */
  model?: ModelSpec | EvaluationModel;
  instructions?: unknown;
}

/** The paths of every `command` field in a JSON value, to a bounded depth (options are small). */
function commandPaths(value: unknown, path: string, depth = 0): string[] {
  if (depth > 8 || value === null || typeof value !== 'object') return [];
  const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v] as const) : Object.entries(value);
  return entries.flatMap(([k, v]) => (k === 'command' && !Array.isArray(value) ? [`${path}.${k}`] : commandPaths(v, `${path}.${k}`, depth + 1)));
}

/**
 * The issues of a request on a deployed stack (`deployed`), or anywhere; none when it may go ahead. `outbound`:
 * what endpoints named in options may be (the operator's ESOPT_ENDPOINT_NETWORKS on a stack; this machine too
 * when local) — checked here on what needs no DNS, and again by the Episode function on the address it connects to.
 */
export function requestChoiceIssues(
  input: RequestChoiceInput,
  deployed: boolean,
  outbound: OutboundPolicy = outboundPolicyFromEnv(process.env, deployed ? PUBLIC_ONLY : EMBEDDED_OUTBOUND),
): FieldIssue[] {
  const issues: FieldIssue[] = [];
  for (const { path, url } of endpointUrls(input.environment.options, 'environment.options')) {
    try {
      checkUrl(new URL(url), outbound);
    } catch (err) {
      if (!(err instanceof OutboundError) && !(err instanceof TypeError)) throw err;
      issues.push({ path, message: err instanceof OutboundError ? err.message : 'is not a URL' });
    }
  }
  // A web app's further origins (no key goes there, so they are not endpoint urls), checked the same way.
  const app = input.environment.name === 'web' ? ((input.environment.options ?? {}) as { app?: { alsoAllow?: unknown } }).app : undefined;
  if (Array.isArray(app?.alsoAllow)) {
    app.alsoAllow.forEach((url, i) => {
      try {
        checkUrl(new URL(String(url)), outbound);
      } catch (err) {
        if (!(err instanceof OutboundError) && !(err instanceof TypeError)) throw err;
        issues.push({ path: `environment.options.app.alsoAllow.${i}`, message: err instanceof OutboundError ? err.message : 'is not a URL' });
      }
    });
  }
  if (deployed) {
    if (input.environment.keyEnv !== undefined) issues.push({ path: 'environment.keyEnv', message: "a deployed stack reads no environment variable for a request: its functions' variables hold the stack's own secrets" });
    for (const name of HOST_OPTIONS[input.environment.name] ?? []) {
      if (at(input.environment.options, name) !== undefined) {
        const hint = name === 'miniwob.dir' ? ': push the folder (esopt tasks push DIR --name NAME --cloud) and name it as miniwob.folder' : ' (leave it out)';
        issues.push({ path: `environment.options.${name}`, message: `a deployed stack chooses its own programs and opens no path on its machines: a request may not name one${hint}` });
      }
    }
    const spec = input.model && 'kind' in input.model ? (input.model.kind === 'base' ? { path: 'model.model', model: input.model.model } : null) : input.model ? { path: 'model', model: input.model } : null;
    if (spec && 'dir' in spec.model) {
      issues.push({ path: `${spec.path}.dir`, message: "a deployed stack opens no path on the trainer box's disk: push the model (esopt models push DIR --cloud) and name it as { \"name\": ... }, or name a preset" });
    }
  }
  if (input.environment.keyParameter !== undefined) issues.push({ path: 'environment.keyParameter', message: 'is set by the API from the X-Esopt-Environment-Key header, never by a request' });
  for (const path of commandPaths(input.environment.options, 'environment.options')) {
    issues.push({ path, message: 'a request over HTTP starts no program: a command comes only from a run config file (esopt train --config FILE); give an https url instead' });
  }
  const model = input.model;
  // esopt's own models read text: a screenshot view would fail every episode at its first turn, so it is refused here.
  const observation = input.environment.name === 'web' ? at(input.environment.options, 'observation') : undefined;
  const ownModel = model !== undefined && !('kind' in model && model.kind === 'external');
  if (ownModel && Array.isArray(observation) && observation.includes('screenshot')) {
    issues.push({ path: 'environment.options.observation', message: "esopt's own models read text only: a screenshot view is for an external agent that reads images (an evaluation's model.kind \"external\"); use \"text\" or \"axtree\"" });
  }
  if (input.environment.name === 'rollout' && input.instructions !== undefined) {
    issues.push({ path: 'instructions', message: 'a rollout agent writes its own prompts, so instructions would reach no model: leave them out' });
  }
  if (input.environment.name === 'rollout' && model && 'kind' in model && model.kind === 'external') {
    issues.push({ path: 'model.kind', message: "a rollout's agent calls esopt's inference server with a key of its own: evaluate a base model or a checkpoint (an external model is called by your agent itself)" });
  }
  if (model && 'kind' in model && model.kind === 'external' && model.apiKey !== undefined && new URL(model.baseUrl).protocol !== 'https:' && !isLoopbackUrl(model.baseUrl)) {
    issues.push({ path: 'model.baseUrl', message: 'an endpoint with an API key must be https, so the key does not travel in clear text' });
  }
  return issues;
}
