/**
 * The Episode function: the one piece of code that turns an EpisodeRequest into a RewardRecord, run
 * by AWS Lambda (`handler`) and by the local worker pool (`createEpisodeHandler`) alike.
 *
 * For every request: skip it if its record already exists (Lambda's async invoke delivers at least
 * once), run the episode against the policy endpoint, and write one RewardRecord create-only under
 * `keys.reward(run, iteration, member, task)`. A malformed event is logged and answered with a clear
 * error instead of throwing, so Lambda does not retry it and nothing upstream crashes.
 *
 * Episodes of the base weights (evaluations: the API's and a run's own) also store their transcript,
 * size-bounded (episode-transcript.ts), create-only at `keys.transcript(...)`, and the record names it
 * in `transcriptKey`. Population members' episodes do not: nobody reads a perturbed member's play, and
 * training would pay a second write per episode. The same episodes keep the screenshot of every step, where
 * the environment draws one, for their replay (episode-frames.ts, bounded; the transcript names each frame).
 *
 * Which policy an episode plays against, and where its token may go, is episode-policy.ts's.
 */
import { pino } from 'pino';
import { z } from 'zod';
import { CostPrices, episodeCost } from '../shared/cost.ts';
import { pricesFromEnv } from './cost-prices-env.ts';
import { keys, retentionTags } from '../shared/keys.ts';
import type { ObjectStore } from '../shared/ports/object-store.ts';
import type { SecretStore } from '../shared/ports/secret-store.ts';
import { SsmSecretStore } from '../shared/secrets/ssm.ts';
import { RewardRecord, type EpisodeRequest, type FramesNote } from '../shared/schemas/index.ts';
import { DEFAULT_AWS_REGION } from '../shared/store/aws-region.ts';
import { writeJson } from '../shared/store/json.ts';
import { openStore, StoreSpec } from '../shared/store/store-spec.ts';
import { runEpisode, type EpisodeResult } from '../environments/episode-runner.ts';
import { loadEnvironment } from '../environments/index.ts';
import type { EnvironmentContext } from '../environments/environment.ts';
import { outboundPolicyFromEnv } from '../environments/outbound/address-policy.ts';
import { parseEpisodeEvent, type EpisodeOutcome, type EpisodeResponse } from './episode-event.ts';
import { boundTranscript } from './episode-transcript.ts';
import { frameRecorder } from './episode-frames.ts';
import { ReplicaUrls, trainerLinkFromEnv } from './trainer-certificate.ts';
import { evaluationKeyFor, policyFor, type EpisodePolicyOptions, type PinOf } from './episode-policy.ts';
import { cachedSecrets } from './secret-cache.ts';
import { rolloutEpisode } from './episode-rollout.ts';
import { evaluationKeyFrom } from '../shared/secrets/evaluation-key.ts';
import { endpointUrls } from '../environments/outbound/endpoint-urls.ts';
import { redactSecret } from './secret-redaction.ts';

export interface EpisodeLog {
  info(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

/** The handler's settings, with those of the policy each episode plays against (episode-policy.ts). */
export interface EpisodeHandlerOptions extends EpisodePolicyOptions {
  store: ObjectStore;
  /**
   * Where `policy.tokenParameter` is read (SSM on Lambda): a queued evaluation's endpoint key, sent only to
   * the origin it was stored for. Without one such requests fail.
   */
  secrets?: SecretStore;
  /** Memory of the worker for the cost estimate; 0 for local workers. */
  memoryMb: number;
  /** Whether each invocation pays Lambda's request price (false for the local pool). */
  billedPerInvocation: boolean;
  /** What an episode costs (the stack's ESOPT_COST_PRICES on Lambda; the trainer's measured prices locally). */
  prices: CostPrices;
  log?: EpisodeLog;
  /** Aborts every episode in flight (the local pool's cancellation). */
  signal?: AbortSignal;
  /**
   * What environments may reach and start (environments/environment.ts): a deployed stack's by default
   * (public endpoints, or the operator's ESOPT_ENDPOINT_NETWORKS in `env`; no commands); embedded runs pass their own.
   */
  environmentContext?: Omit<EnvironmentContext, 'endpointKey'>;
  /**
   * Whether `environment.keyEnv` may be read from `env` (embedded runs: the user's own shell). Never on a stack:
   * the function's environment holds the stack's secrets, and a request must not pick one to send away.
   */
  environmentKeysFromEnv?: boolean;
}

function describeZodError(error: z.ZodError): string {
  return error.issues
    .slice(0, 10)
    .map((i) => `${i.path.length ? i.path.join('.') : '(event)'}: ${i.message}`)
    .join('; ');
}

/** An episode that never got to run (unknown environment, bad task, missing token) still gets a record. */
function failedResult(err: unknown, started: number): EpisodeResult {
  return {
    reward: 0,
    steps: 0,
    transcript: [],
    tokens: { prompt: 0, completion: 0 },
    inferenceMs: 0,
    durationMs: performance.now() - started,
    stopReason: 'error',
    error: (err instanceof Error ? err.message : String(err)).slice(0, 2000),
  };
}

export function createEpisodeHandler(options: EpisodeHandlerOptions): (event: unknown) => Promise<EpisodeResponse> {
  const prices = CostPrices.parse(options.prices);
  const log = options.log ?? pino({ name: 'esopt-episode' });
  const { store } = options;
  const secrets = options.secrets && cachedSecrets(options.secrets);
  // The store goes with the context: an episode reads what its options pinned there (a pushed task folder).
  const environmentContext = { ...(options.environmentContext ?? { outbound: outboundPolicyFromEnv(options.env), allowCommands: false }), store };

  /** The transcript's key once it is in the store; null when it is not kept, or could not be written (the reward matters more). */
  async function storeTranscript(request: EpisodeRequest, result: EpisodeResult, frames: FramesNote | undefined): Promise<string | null> {
    if (request.member !== 'base') return null;
    const key = keys.transcript(request.run, request.iteration, request.member, request.task.id);
    const about = { run: request.run, iteration: request.iteration, member: request.member, task: request.task.id };
    // A note only where there were screenshots to keep: an environment that draws nothing has no frames to speak of.
    const body = boundTranscript(frames && frames.kept + frames.omitted > 0 ? { ...about, frames } : about, result.transcript);
    try {
      // Create-only: a re-delivered episode leaves the first transcript, which its record names.
      // Tagged: the bucket's lifecycle expires transcripts after ESOPT_TRANSCRIPT_DAYS (no prefix names them all).
      await writeJson(store, key, body, true, { tags: retentionTags.transcript });
      return key;
    } catch (err) {
      log.error({ key, error: (err as Error).message }, 'transcript not stored');
      return null;
    }
  }

  /**
   * The key for the environment's own endpoint: from the secret the API stored (`keyParameter`, bound to the
   * endpoint's origin, which every URL in the options must be on), or from the variable `keyEnv` names (embedded runs).
   */
  async function environmentKey(request: EpisodeRequest): Promise<string | undefined> {
    const { keyEnv, keyParameter } = request.environment;
    if (keyEnv !== undefined && keyParameter !== undefined) throw new Error('an environment names its key by keyEnv or by keyParameter, not both');
    if (keyParameter !== undefined) {
      if (!secrets) throw new Error(`this worker has no secret store to read ${keyParameter} from`);
      return evaluationKeyFrom(keyParameter, await secrets.get(keyParameter), endpointUrls(request.environment.options, 'options').map((u) => u.url));
    }
    if (keyEnv === undefined) return undefined;
    if (!options.environmentKeysFromEnv) throw new Error(`environment.keyEnv is for embedded runs: this worker reads no key from its environment (${keyEnv})`);
    const key = options.env[keyEnv];
    if (!key) throw new Error(`environment.keyEnv names ${keyEnv}, which is not set in the worker's environment`);
    return key;
  }

  async function one(request: EpisodeRequest, batchSize: number, pinOf: PinOf | undefined): Promise<EpisodeOutcome> {
    const key = keys.reward(request.run, request.iteration, request.member, request.task.id);
    const base = { key, written: false, duplicate: false, closed: false, reward: null, error: null };
    if ((await store.get(key)) !== null) {
      log.info({ key }, 'record exists already: duplicate delivery, episode skipped');
      return { ...base, duplicate: true };
    }
    const started = performance.now();
    const deadline = Date.parse(request.deadline);
    let result: EpisodeResult;
    // Evaluation episodes (the base weights) keep their screenshots for the replay; members' never do.
    const frames = request.member === 'base' ? frameRecorder(store, { run: request.run, iteration: request.iteration, member: request.member, task: request.task.id }) : undefined;
    let evaluationKey: string | undefined;
    let endpointKey: string | undefined;
    try {
      const definition = await loadEnvironment(request.environment.name);
      evaluationKey = await evaluationKeyFor(request, secrets);
      endpointKey = await environmentKey(request);
      const context: EnvironmentContext = { ...environmentContext, ...(endpointKey ? { endpointKey } : {}) };
      if (definition.name === 'rollout') {
        // The agent plays the whole episode itself, with a key of its own (episode-rollout.ts).
        result = await rolloutEpisode({ request, options, deadline, pinOf, evaluationKey, context, ...(options.signal ? { signal: options.signal } : {}) });
      } else {
        const policy = await policyFor(request, definition, options, deadline, pinOf, evaluationKey, context.outbound);
        result = await runEpisode({
          definition,
          task: request.task.value,
          options: request.environment.options,
          policy,
          seed: request.seed,
          deadline,
          signal: options.signal,
          context,
          ...(request.instructions ? { instructions: request.instructions } : {}),
          ...(frames ? { frames: frames.sink } : {}),
        });
      }
    } catch (err) {
      result = failedResult(err, started);
    }
    // An endpoint that echoes its key (an error body, a reply) must not get it into the bucket or a log.
    if (evaluationKey) result = redactSecret(result, evaluationKey);
    if (endpointKey) result = redactSecret(result, endpointKey);
    if (result.stopReason === 'iteration-closed') {
      log.info({ key, error: result.error }, 'iteration closed: episode stopped, no record written');
      return { ...base, closed: true, error: result.error };
    }
    let framesNote: FramesNote | undefined;
    if (frames) ({ result, note: framesNote } = await frames.settle(result));
    const transcriptKey = await storeTranscript(request, result, framesNote);
    const record = RewardRecord.parse({
      run: request.run,
      iteration: request.iteration,
      member: request.member,
      task: request.task.id,
      reward: result.reward,
      steps: result.steps,
      tokens: result.tokens,
      durations: { episodeMs: result.durationMs, inferenceMs: result.inferenceMs },
      cost: episodeCost(
        {
          durationMs: result.durationMs,
          memoryMb: options.memoryMb,
          completionTokens: result.tokens.completion,
          episodesPerInvocation: options.billedPerInvocation ? batchSize : 0,
        },
        prices,
      ),
      error: result.error,
      transcriptKey,
      writtenAt: new Date().toISOString(),
    });
    const written = await writeJson(store, key, record, true);
    log.info({ key, written, reward: record.reward, steps: record.steps, error: record.error }, written ? 'reward written' : 'record appeared meanwhile: duplicate delivery');
    return { ...base, written, duplicate: !written, reward: record.reward, error: record.error };
  }

  return async (event) => {
    const parsed = parseEpisodeEvent(event);
    if (!parsed.success) {
      const error = `invalid episode event: ${describeZodError(parsed.error)}`;
      log.error({ error }, 'malformed event rejected');
      return { ok: false, error };
    }
    const { requests } = parsed;
    // Episodes of one invocation run side by side: each mostly waits on inference.
    // The trainer boxes' certificates: each read once per invocation, by the first episode that calls that box.
    const pinOf = options.trainerPins?.session();
    const outcomes = await Promise.all(requests.map((r) => one(r, requests.length, pinOf)));
    return { ok: true, outcomes };
  };
}

/** The Lambda's configuration, from the environment sst.config.ts gives it. */
export const EpisodeFunctionEnv = z.object({
  ESOPT_BUCKET: z.string().min(3),
  /** The coordinator box's OpenAI-compatible base URL; with the replicas', the only origins the token is sent to. */
  ESOPT_TRAINER_URL: z.url().optional(),
  /** The trainer replica boxes as `replica-1=https://…/v1,replica-2=…` (sst.config.ts: ESOPT_REPLICAS − 1 of them). */
  ESOPT_REPLICA_URLS: ReplicaUrls,
  /** The bearer token, named by `policy.tokenEnv` in the requests the trainer sends. */
  ESOPT_TRAINER_TOKEN: z.string().min(1).optional(),
  /** Only for S3-compatible servers (the dev endpoint); AWS needs neither. */
  ESOPT_S3_ENDPOINT: z.url().optional(),
  ESOPT_S3_FORCE_PATH_STYLE: z.enum(['true', 'false']).default('false'),
  AWS_REGION: z.string().min(1).default(DEFAULT_AWS_REGION),
  AWS_LAMBDA_FUNCTION_MEMORY_SIZE: z.coerce.number().int().min(128).default(1024),
  /** JSON of CostPrices: set by the stack from the box's measured decode rate (functions/cost-prices-env.ts). */
  ESOPT_COST_PRICES: z.string().min(1),
});

export function storeSpecFromEnv(env: z.infer<typeof EpisodeFunctionEnv>): StoreSpec {
  return StoreSpec.parse({
    kind: 's3',
    bucket: env.ESOPT_BUCKET,
    region: env.AWS_REGION,
    endpoint: env.ESOPT_S3_ENDPOINT,
    forcePathStyle: env.ESOPT_S3_FORCE_PATH_STYLE === 'true',
  });
}

let lambdaHandler: ((event: unknown) => Promise<EpisodeResponse>) | undefined;

/** The AWS Lambda entry point (`functions/episode.handler` in sst.config.ts). */
export async function handler(event: unknown): Promise<EpisodeResponse> {
  if (!lambdaHandler) {
    const env = EpisodeFunctionEnv.parse(process.env);
    const store = openStore(storeSpecFromEnv(env));
    // An https trainer's boxes are pinned to the certificates they published in the bucket.
    const link = trainerLinkFromEnv(store, env);
    lambdaHandler = createEpisodeHandler({
      store,
      env: process.env,
      tokenOrigins: link.tokenOrigins,
      trainerPins: link.pins,
      memoryMb: env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE,
      // Queued evaluations' endpoint keys: SSM SecureStrings the function's role may only read (sst.config.ts).
      secrets: new SsmSecretStore({ region: env.AWS_REGION }),
      billedPerInvocation: true,
      prices: pricesFromEnv(env.ESOPT_COST_PRICES),
    });
  }
  return lambdaHandler(event);
}
