/**
 * The policy an episode plays against, and what it may send where: the environment's scripted policies for
 * `scripted:` endpoints, the trainer's own engine in process, or an OpenAI-compatible endpoint over HTTP with
 * the token the request names (the trainer token from the worker's environment, or a queued evaluation's key
 * from the secret store).
 *
 * Invariant: a secret goes only where it belongs, checked before any request is made. The trainer token goes
 * only to `tokenOrigins` (the deployed boxes), each called, where their certificates are known
 * (`trainerPins`), over https pinned to the one its box published for exactly that origin; an evaluation's
 * key goes only to the origin it was stored for.
 */
import type { Policy } from '../shared/ports/policy.ts';
import type { SecretStore } from '../shared/ports/secret-store.ts';
import { evaluationKeyFrom } from '../shared/secrets/evaluation-key.ts';
import type { EpisodeRequest } from '../shared/schemas/index.ts';
import type { EnvironmentDefinition } from '../environments/environment.ts';
import { parseWith } from '../environments/index.ts';
import { HttpPolicy } from '../environments/policies/http-client.ts';
import type { CertificatePin } from '../environments/policies/pinned-fetch.ts';
import type { TrainerPins } from './trainer-certificate.ts';
import type { OutboundPolicy } from '../environments/outbound/address-policy.ts';

/**
 * `scripted:oracle` and `scripted:random` as a policy's baseUrl play the environment's scripted
 * policies instead of a model: for CPU-only simulations of the cloud path (`esopt dev cloud`,
 * `esopt bench fanout`). Everything else is an OpenAI-compatible endpoint.
 */
const SCRIPTED = /^scripted:(?:\/\/)?(oracle|random)$/;

/** What the policies are given by the Episode function's options (EpisodeHandlerOptions extends it). */
export interface EpisodePolicyOptions {
  /** Where `policy.tokenEnv` is looked up: the bearer token never travels in the event. */
  env: Record<string, string | undefined>;
  /**
   * When set, a token is only ever sent to these origins (the deployed trainer boxes' URLs), so an event
   * naming some other endpoint cannot make the function hand the secret to it.
   */
  tokenOrigins?: string[];
  /**
   * The trainer boxes' certificates: every server a token goes to (and the coordinator, token or not) is
   * called over https pinned to the certificate published for exactly its origin (trainer-certificate.ts),
   * and an origin nobody announced is refused. Without it the trainer is called like any endpoint.
   */
  trainerPins?: TrainerPins;
  /**
   * Plays each model episode with this policy instead of calling the request's endpoint: the trainer's
   * own engine, when the episodes run in its process (trainer/fanout/in-process.ts).
   */
  policyOf?: (request: EpisodeRequest) => Policy;
}

/** A queued evaluation's key, from the secret store, once every URL the episode may call is on its origin. */
export async function evaluationKeyFor(request: EpisodeRequest, secrets: SecretStore | undefined): Promise<string | undefined> {
  const parameter = request.policy.tokenParameter;
  if (!parameter) return undefined;
  if (request.policy.tokenEnv) throw new Error('a policy names its token by tokenEnv or by tokenParameter, not both');
  if (!secrets) throw new Error(`this worker has no secret store to read ${parameter} from`);
  return evaluationKeyFrom(parameter, await secrets.get(parameter), [request.policy.baseUrl, ...(request.policy.fallbackUrls ?? [])]);
}

export type PinOf = (run: string, origin: string) => Promise<CertificatePin>;

/** Where an episode's model calls go, and with what: the endpoint, its fallbacks, the token and the pins. */
export interface EndpointAccess {
  baseUrl: string;
  fallbackUrls: string[];
  token?: string;
  /** Per origin, the certificate its box published: every call then goes over https pinned to it. */
  pinned?: Record<string, CertificatePin>;
}

/** The endpoint `request` names, its token checked against the origins it may go to (see above). */
export async function endpointAccess(request: EpisodeRequest, options: EpisodePolicyOptions, pinOf: PinOf | undefined, evaluationKey?: string): Promise<EndpointAccess> {
  let token = evaluationKey;
  const fallbackUrls = request.policy.fallbackUrls ?? [];
  const origins = [...new Set([request.policy.baseUrl, ...fallbackUrls].map((url) => new URL(url).origin))];
  if (request.policy.tokenEnv) {
    // Every server the token may go to (the member's replica and its fallbacks) must be one of ours.
    for (const origin of origins) {
      if (options.tokenOrigins && !options.tokenOrigins.includes(origin)) {
        throw new Error(`refusing to send the trainer token to ${origin}: this function only talks to ${options.tokenOrigins.join(', ')}`);
      }
    }
  }
  // Each of them pinned to the certificate its box published for that origin, or refused before any request.
  const pinned = pinOf && (request.policy.tokenEnv || origins.includes(options.trainerPins!.coordinatorOrigin))
    ? Object.fromEntries(await Promise.all(origins.map(async (origin) => [origin, await pinOf(request.run, origin)] as const)))
    : undefined;
  if (request.policy.tokenEnv) {
    token = options.env[request.policy.tokenEnv];
    if (!token) throw new Error(`the policy's token variable ${request.policy.tokenEnv} is not set in the worker's environment`);
  }
  return { baseUrl: request.policy.baseUrl, fallbackUrls, ...(token ? { token } : {}), ...(pinned ? { pinned } : {}) };
}

/** Whether the request's endpoint is one of the environment's scripted policies (`scripted:oracle`, `scripted:random`). */
export function isScripted(request: EpisodeRequest): boolean {
  return SCRIPTED.test(request.policy.baseUrl);
}

/** The policy `request` plays against, its token checked against the origins it may go to (see above). */
export async function policyFor(
  request: EpisodeRequest,
  definition: EnvironmentDefinition,
  options: EpisodePolicyOptions,
  deadline: number,
  pinOf: PinOf | undefined,
  evaluationKey: string | undefined,
  outbound: OutboundPolicy,
): Promise<Policy> {
  const scripted = SCRIPTED.exec(request.policy.baseUrl);
  if (scripted) {
    const task = parseWith(definition.taskSchema, request.task.value, `${definition.name} task`);
    const options = parseWith(definition.optionsSchema, request.environment.options, `${definition.name} options`);
    return scripted[1] === 'oracle' ? definition.oracle(task, options) : definition.random(task, options, request.seed);
  }
  if (options.policyOf) return options.policyOf(request);
  const access = await endpointAccess(request, options, pinOf, evaluationKey);
  // Not one of our trainer servers (no trainer token, no pinned box): an endpoint of someone else's, called as outbound.
  const external = !request.policy.tokenEnv && !access.pinned;
  return new HttpPolicy({
    ...(access.pinned ? { pinnedCertificates: Object.fromEntries(Object.entries(access.pinned).map(([o, p]) => [o, { certificate: p.certificate, sha256: p.sha256 }])) } : {}),
    ...(external ? { outbound } : {}),
    baseUrl: access.baseUrl,
    fallbackUrls: access.fallbackUrls,
    model: request.policy.model,
    token: access.token,
    temperature: request.generation.temperature,
    topP: request.generation.topP,
    topK: request.generation.topK,
    maxTokens: request.generation.maxTokens,
    seed: request.seed,
    guidedDecoding: request.policy.guidedDecoding ?? true,
    // No single call may outlive the episode's deadline.
    timeoutMs: Math.max(1, Math.min(60_000, deadline - Date.now())),
  });
}
