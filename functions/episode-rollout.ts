/**
 * A `rollout` episode in the Episode function: a key of the rollout's own is issued by the inference server
 * that serves the member (POST {baseUrl}/rollouts, with the trainer's token, over the same checked and pinned
 * connection a policy would use), the agent plays with it (environments/rollout/play.ts), the server's count
 * for the key decides whether the reward stands, and the key is revoked whatever happened.
 *
 * The trainer token never reaches the agent: only the rollout key does, which opens chat completions of this
 * one model until the episode's deadline. The key is taken out of the result before it is stored or logged.
 */
import { z } from 'zod';
import type { EpisodeRequest } from '../shared/schemas/index.ts';
import type { EnvironmentContext } from '../environments/environment.ts';
import type { EpisodeResult } from '../environments/episode-runner.ts';
import { pinnedFetchByOrigin } from '../environments/policies/pinned-fetch.ts';
import { playRollout, type RolloutUsage } from '../environments/rollout/play.ts';
import { endpointAccess, isScripted, type EpisodePolicyOptions, type PinOf } from './episode-policy.ts';
import { redactSecret } from './secret-redaction.ts';

const IssuedKey = z.object({ id: z.string().min(1).max(100), key: z.string().min(1).max(200) });
const KeyUsage = z.object({ calls: z.number().int().min(0), promptTokens: z.number().int().min(0), completionTokens: z.number().int().min(0) });

/** How long past the deadline a key may still answer: an agent's last call in flight at the deadline. */
const KEY_SLACK_MS = 5_000;

export interface RolloutEpisodeInput {
  request: EpisodeRequest;
  options: EpisodePolicyOptions;
  deadline: number;
  pinOf: PinOf | undefined;
  evaluationKey?: string;
  context: EnvironmentContext;
  signal?: AbortSignal;
}

export async function rolloutEpisode(input: RolloutEpisodeInput): Promise<EpisodeResult> {
  const { request, options, deadline } = input;
  if (isScripted(request)) throw new Error('a rollout is played by your agent: scripted policies (scripted:oracle, scripted:random) cannot play one');
  if (options.policyOf) throw new Error('rollout episodes call the inference server over HTTP: run them with localEpisodes "worker-processes", not "in-process"');
  const access = await endpointAccess(request, options, input.pinOf, input.evaluationKey);
  const call = access.pinned ? pinnedFetchByOrigin(access.pinned) : fetch;
  const headers = { 'content-type': 'application/json', ...(access.token ? { authorization: `Bearer ${access.token}` } : {}) };
  const timeout = () => AbortSignal.timeout(Math.max(1_000, Math.min(30_000, deadline - Date.now())));

  // The member's server, or a replica holding the same weights when it does not answer.
  let issued: { baseUrl: string; id: string; key: string } | undefined;
  let lastFailure = '';
  for (const baseUrl of [access.baseUrl, ...access.fallbackUrls]) {
    try {
      const res = await call(`${baseUrl}/rollouts`, { method: 'POST', headers, body: JSON.stringify({ model: request.policy.model, expiresInMs: Math.max(1_000, deadline - Date.now() + KEY_SLACK_MS) }), signal: timeout() });
      if (res.status === 404 && !issued) {
        await res.body?.cancel();
        throw new Error(`${new URL(baseUrl).origin} does not issue rollout keys (HTTP 404): a rollout needs esopt's inference server, not an external model`);
      }
      if (!res.ok) {
        await res.body?.cancel();
        lastFailure = `HTTP ${res.status}`;
        if (res.status < 500) break;
        continue;
      }
      issued = { baseUrl, ...IssuedKey.parse(await res.json()) };
      break;
    } catch (err) {
      if (err instanceof Error && /does not issue rollout keys/.test(err.message)) throw err;
      lastFailure = err instanceof Error ? err.message : String(err);
    }
  }
  if (!issued) throw new Error(`the inference server issued no rollout key (${lastFailure})`);
  const { baseUrl, id, key } = issued;
  const usage = async (): Promise<RolloutUsage> => {
    const res = await call(`${baseUrl}/rollouts/${encodeURIComponent(id)}`, { headers, signal: timeout() });
    if (!res.ok) throw new Error(`the inference server could not say what the rollout's key was served (HTTP ${res.status})`);
    return KeyUsage.parse(await res.json());
  };
  try {
    const origin = new URL(baseUrl).origin;
    const certificate = access.pinned?.[origin]?.certificate;
    const result = await playRollout({
      task: request.task.value,
      options: request.environment.options,
      seed: request.seed,
      grant: { baseUrl, model: request.policy.model, apiKey: key, ...(certificate ? { certificate } : {}) },
      usage,
      context: input.context,
      deadline,
      ...(input.signal ? { signal: input.signal } : {}),
    });
    return redactSecret(result, key);
  } finally {
    await call(`${baseUrl}/rollouts/${encodeURIComponent(id)}`, { method: 'DELETE', headers, signal: timeout() }).then(
      (res) => res.body?.cancel(),
      () => undefined,
    );
  }
}
