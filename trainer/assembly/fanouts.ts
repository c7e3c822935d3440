/**
 * Fan-outs for the entry points that drive one without a Site (a benchmark of the pool or of Lambda, the
 * local API's evaluations, `esopt dev cloud`): the local worker pool, the Lambda adapter, and the wrapper
 * that waits for an Event invoke's records. Sites (local-site.ts, cloud-stack.ts) build theirs here too.
 */
import type { Fanout } from '../../shared/ports/fanout.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { InProcessFanout } from '../fanout/in-process.ts';
import { LambdaFanout, type LambdaFanoutOptionsInput } from '../fanout/lambda.ts';
import { LocalFanout, type LocalFanoutOptions } from '../fanout/local.ts';
import { RecordAwaitingFanout } from '../fanout/record-awaiting.ts';

/** The local worker pool: child processes running the Episode function's handler. */
export function localPool(options: LocalFanoutOptions): LocalFanout {
  return new LocalFanout(options);
}

/** Episodes played in this process on an engine given later (`useEngine`), rewards written to `store`. */
export function inProcessFanout(store: ObjectStore): InProcessFanout {
  return new InProcessFanout(store);
}

/** The Episode function invoked through the Lambda API. */
export function lambdaFanout(options: LambdaFanoutOptionsInput): LambdaFanout {
  return new LambdaFanout(options);
}

/** A dispatch that settles only once every episode's record is in the store (an Event invoke settles at the queue). */
export function awaitingRecords(fanout: Fanout, store: ObjectStore, pollMs?: number): RecordAwaitingFanout {
  return new RecordAwaitingFanout(fanout, store, pollMs);
}
