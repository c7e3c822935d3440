/**
 * Queued work wakes the trainer box: after each queue entry the Api function calls StartInstances on the
 * box's instance (its role may do that and nothing more). A running or starting box is left as it is (EC2
 * answers with its state). A box caught stopping (it stopped itself idle in the same seconds) cannot be
 * started until it has stopped, and nothing else would start it for this entry, so the start is tried again
 * every `retryMs` for up to `withinMs`. A failure is logged, never the request's: the work is queued.
 */
import type { Logger } from 'pino';
import type { PowerChange } from '../../shared/boxes/ec2-instance.ts';

export interface BoxWakeOptions {
  retryMs?: number;
  withinMs?: number;
  sleep?: (ms: number) => Promise<void>;
}

export function boxWaker(instance: { start(): Promise<PowerChange> }, log: Pick<Logger, 'info' | 'error'>, o: BoxWakeOptions = {}): () => Promise<void> {
  const retryMs = o.retryMs ?? 2000;
  const withinMs = o.withinMs ?? 20_000;
  const sleep = o.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  return async () => {
    for (let waited = 0; ; waited += retryMs) {
      try {
        const change = await instance.start();
        if (change.previous !== change.current) log.info(change, 'queued work: the trainer box is starting');
        return;
      } catch (err) {
        const stopping = (err as { name?: string }).name === 'IncorrectInstanceState';
        if (!stopping || waited + retryMs > withinMs) {
          log.error({ error: (err as Error).message }, 'queued work: could not start the trainer box; the work waits in the queue until it runs');
          return;
        }
        await sleep(retryMs);
      }
    }
  };
}
