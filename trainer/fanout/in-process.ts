/**
 * The in-process Fanout: episodes run in the trainer's own process through the Episode function's code
 * (the same records, transcripts and duplicate checks), each model turn decoded on the run's engine
 * directly — no HTTP hop, no worker processes, and every turn in flight joins one engine batch. What it
 * gives up is isolation: an environment that hangs the event loop hangs the trainer, and a per-episode
 * time limit is only the request's deadline, which the episode checks between turns. For trusted,
 * pure-JS environments on one machine (the demo); the worker pool (local.ts) stays the default.
 */
import { setMaxListeners } from 'node:events';
import type { DispatchOptions, DispatchOutcome, Fanout } from '../../shared/ports/fanout.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import type { EpisodeRequest } from '../../shared/schemas/index.ts';
import { EMBEDDED_OUTBOUND, outboundPolicyFromEnv } from '../../environments/outbound/address-policy.ts';
import { createEpisodeHandler } from '../../functions/episode.ts';
import type { Engine } from '../engine/engine.ts';
import { failAll, mapWithConcurrency, outcomesFromResponse } from './batches.ts';
import { EnginePolicy } from './engine-policy.ts';
import { RowCoalescer } from './row-coalescer.ts';
import { measuredPrices } from './measured-prices.ts';

const quiet = { info() {}, error() {} };

export class InProcessFanout implements Fanout {
  private coalescer: RowCoalescer | null = null;
  private closed = false;

  constructor(private readonly store: ObjectStore) {}

  /** The engine the episodes play on; set once the run has served it, before the first dispatch. */
  useEngine(engine: Pick<Engine, 'generate'>): void {
    this.coalescer = new RowCoalescer(engine);
  }

  async dispatch(requests: EpisodeRequest[], options: DispatchOptions): Promise<DispatchOutcome[]> {
    if (this.closed) throw new Error('the in-process fan-out is closed');
    const coalescer = this.coalescer;
    if (!coalescer) throw new Error('the in-process fan-out has no engine yet: the run must serve its model before dispatching');
    // Every episode in flight listens to the dispatch's signal once (and lets go when it ends).
    if (options.signal) setMaxListeners(options.concurrency + 10, options.signal);
    const handler = createEpisodeHandler({
prices: measuredPrices(),
      store: this.store,
      env: process.env,
      memoryMb: 0,
      billedPerInvocation: false,
      log: quiet,
      environmentContext: { outbound: outboundPolicyFromEnv(process.env, EMBEDDED_OUTBOUND), allowCommands: true },
      environmentKeysFromEnv: true,
      ...(options.signal ? { signal: options.signal } : {}),
      policyOf: (request) => new EnginePolicy(coalescer, request),
    });
    const skipped = (r: EpisodeRequest) => failAll([r], 'the dispatch was cancelled before this episode started', true)[0];
    return mapWithConcurrency(
      requests,
      options.concurrency,
      async (request) => {
        const response = await handler(request);
        const [outcome] = outcomesFromResponse([request], response);
        return options.signal?.aborted && !outcome.ok ? { ...outcome, timedOut: true } : outcome;
      },
      skipped,
      options.signal,
    );
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}
