/**
 * The Fanout on AWS Lambda: one InvokeCommand per batch of episodes, at most `concurrency` in flight.
 *
 * `Event` (the default) hands the batch to Lambda's async queue and returns at the 202: the rewards come
 * back through the object store, and Lambda may deliver an event more than once, which the handler's
 * duplicate check, create-only writes and the reader's one-per-(member, task) rule make harmless.
 * `RequestResponse` waits for the function and reads its outcomes.
 *
 * Throttling (429 TooManyRequestsException) and 5xx are retried here, with jittered exponential
 * back-off, so the policy is ours and visible: the SDK's own retries are switched off. The SDK is
 * imported by the first dispatch, not with this file, so commands that only might fan out to Lambda
 * (`esopt train` on a local config) do not load it.
 */
import type { LambdaClient } from '@aws-sdk/client-lambda';
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { DEFAULT_AWS_REGION } from '../../shared/store/aws-region.ts';
import type { DispatchOptions, DispatchOutcome, Fanout } from '../../shared/ports/fanout.ts';
import type { EpisodeRequest } from '../../shared/schemas/index.ts';
import { backoffMs } from '../../environments/policies/http-client.ts';
import { EpisodeResponse, MAX_EPISODES_PER_INVOCATION } from '../../functions/episode-event.ts';
import { failAll, mapWithConcurrency, outcomesFromResponse, toBatches, toEvent } from './batches.ts';

export const LambdaFanoutOptions = z
  .object({
    functionName: z.string().min(1).max(170),
    region: z.string().min(1).default(DEFAULT_AWS_REGION),
    /** A Lambda-Invoke-compatible endpoint instead of AWS (the dev endpoint). */
    endpoint: z.url().optional(),
    credentials: z.object({ accessKeyId: z.string().min(1), secretAccessKey: z.string().min(1) }).optional(),
    invocationType: z.enum(['Event', 'RequestResponse']).default('Event'),
    episodesPerInvocation: z.number().int().min(1).max(MAX_EPISODES_PER_INVOCATION).default(1),
    /** Attempts after the first one, for throttling, 5xx and network errors. */
    retries: z.number().int().min(0).max(50).default(8),
    backoffBaseMs: z.number().min(0).default(100),
    backoffMaxMs: z.number().min(0).default(10_000),
    /** Connections at once; keep it ≥ the dispatch concurrency or invokes queue inside the SDK. */
    maxSockets: z.number().int().min(1).max(10_000).default(256),
  })
  .strict();
export type LambdaFanoutOptionsInput = z.input<typeof LambdaFanoutOptions>;

export interface LambdaFanoutStats {
  invocations: number;
  retries: number;
  throttles: number;
  serverErrors: number;
}

function httpStatus(err: unknown): number | undefined {
  return (err as { $metadata?: { httpStatusCode?: number } } | null)?.$metadata?.httpStatusCode;
}

/** Throttling, a 5xx, or no answer at all: worth another try. Anything else (4xx) is final. */
function classify(err: unknown): 'throttle' | 'server' | 'network' | 'final' {
  const name = (err as { name?: string } | null)?.name ?? '';
  const status = httpStatus(err);
  if (status === 429 || name === 'TooManyRequestsException' || name === 'ThrottlingException') return 'throttle';
  if ((status !== undefined && status >= 500) || (err as { $fault?: string } | null)?.$fault === 'server') return 'server';
  if (status === undefined && name !== 'AbortError') return 'network';
  return 'final';
}

type LambdaSdk = typeof import('@aws-sdk/client-lambda');

export class LambdaFanout implements Fanout {
  readonly options: z.infer<typeof LambdaFanoutOptions>;
  readonly stats: LambdaFanoutStats = { invocations: 0, retries: 0, throttles: 0, serverErrors: 0 };
  /** The SDK and its one client, made by the first dispatch; every later invoke shares them. */
  private connection?: Promise<{ sdk: LambdaSdk; client: LambdaClient }>;

  constructor(options: LambdaFanoutOptionsInput) {
    this.options = LambdaFanoutOptions.parse(options);
  }

  private connect(): Promise<{ sdk: LambdaSdk; client: LambdaClient }> {
    this.connection ??= import('@aws-sdk/client-lambda').then((sdk) => {
      const { region, endpoint, credentials, maxSockets } = this.options;
      const client = new sdk.LambdaClient({
        region,
        endpoint,
        credentials,
        maxAttempts: 1,
        requestHandler: { httpAgent: new HttpAgent({ keepAlive: true, maxSockets }), httpsAgent: new HttpsAgent({ keepAlive: true, maxSockets }) },
      });
      return { sdk, client };
    });
    return this.connection;
  }

  async dispatch(requests: EpisodeRequest[], options: DispatchOptions): Promise<DispatchOutcome[]> {
    await this.connect(); // an SDK that cannot load fails the dispatch once, not each batch
    const batches = toBatches(requests, this.options.episodesPerInvocation);
    const results = await mapWithConcurrency(
      batches,
      options.concurrency,
      (batch) => this.invoke(batch, options),
      (batch) => failAll(batch, 'cancelled before it was invoked', true),
      options.signal,
    );
    return results.flat();
  }

  private async invoke(batch: EpisodeRequest[], { timeoutMs, signal }: DispatchOptions): Promise<DispatchOutcome[]> {
    const o = this.options;
    const { sdk, client } = await this.connect();
    const payload = new TextEncoder().encode(JSON.stringify(toEvent(batch)));
    let lastError = 'not invoked';
    let lastTimedOut = false;
    for (let attempt = 0; attempt <= o.retries; attempt++) {
      if (signal?.aborted) return failAll(batch, 'cancelled', true);
      if (attempt > 0) {
        this.stats.retries++;
        try {
          await sleep(backoffMs(attempt - 1, o.backoffBaseMs, o.backoffMaxMs), undefined, { signal });
        } catch {
          return failAll(batch, 'cancelled', true);
        }
      }
      this.stats.invocations++;
      const timeout = AbortSignal.timeout(timeoutMs);
      try {
        const res = await client.send(
          new sdk.InvokeCommand({ FunctionName: o.functionName, InvocationType: o.invocationType, Payload: payload }),
          { abortSignal: signal ? AbortSignal.any([signal, timeout]) : timeout },
        );
        if (o.invocationType === 'Event') {
          // Accepted into Lambda's queue: the record will appear in the store (or the collector's deadline passes).
          return res.StatusCode === 202 ? batch.map((request) => ({ request, ok: true })) : failAll(batch, `unexpected status ${res.StatusCode} for an Event invoke`);
        }
        const text = res.Payload ? new TextDecoder().decode(res.Payload) : 'null';
        if (res.FunctionError) return failAll(batch, `the function failed (${res.FunctionError}): ${text.slice(0, 1500)}`);
        const parsed = EpisodeResponse.safeParse(JSON.parse(text));
        if (!parsed.success) return failAll(batch, `the function answered something that is not an EpisodeResponse: ${text.slice(0, 500)}`);
        return outcomesFromResponse(batch, parsed.data);
      } catch (err) {
        if (signal?.aborted) return failAll(batch, 'cancelled', true);
        const kind = timeout.aborted ? 'network' : classify(err);
        lastError = timeout.aborted ? `invoke timed out after ${timeoutMs} ms` : `${(err as Error).name}: ${(err as Error).message}`;
        lastTimedOut = timeout.aborted;
        if (kind === 'throttle') this.stats.throttles++;
        if (kind === 'server') this.stats.serverErrors++;
        // A timed-out RequestResponse may still be running: retrying it is safe because records are create-only.
        if (kind === 'final') return failAll(batch, lastError);
      }
    }
    return failAll(batch, `gave up after ${o.retries + 1} attempts: ${lastError}`, lastTimedOut);
  }

  async close(): Promise<void> {
    await this.connection?.then(({ client }) => client.destroy(), () => {});
  }
}
