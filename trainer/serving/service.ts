/**
 * What the HTTP layer serves from: the engine, the live population (the loop sets it; requests are
 * resolved against it), the batcher and the metrics. One object so the loop and the app share one truth
 * about which iteration is live.
 */
import type { Engine, Population } from '../engine/engine.ts';
import { RequestBatcher } from './batcher.ts';
import { ServerMetrics } from './metrics.ts';
import { stillLive } from './model-name.ts';

export interface BatchingOptions {
  windowMs: number;
  maxWaitMs: number;
  maxBatch: number;
  maxQueue: number;
}

export const DEFAULT_BATCHING: BatchingOptions = { windowMs: 5, maxWaitMs: 50, maxBatch: 32, maxQueue: 256 };

export class InferenceService {
  private live: Population | null = null;
  private newestIteration: number | null = null;
  readonly metrics: ServerMetrics;
  readonly batcher: RequestBatcher;

  constructor(
    readonly engine: Engine,
    batching: BatchingOptions = DEFAULT_BATCHING,
  ) {
    this.metrics = new ServerMetrics(() => this.batcher.depth);
    this.batcher = new RequestBatcher(engine, this.metrics, { ...batching, isLive: (s) => stillLive(s, this.live) });
  }

  get population(): Population | null {
    return this.live;
  }

  /** The newest iteration ever live here: a member of a later one has not started yet (503), of an earlier one has finished (409). */
  get newest(): number | null {
    return this.newestIteration;
  }

  /** Called by the loop at the start of an iteration (and with null after it): members of other iterations get 409. */
  setPopulation(p: Population | null): void {
    this.engine.setPopulation(p);
    this.live = p;
    if (p) this.newestIteration = Math.max(this.newestIteration ?? p.iteration, p.iteration);
  }
}
