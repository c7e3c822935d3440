import { keys } from '../../../shared/keys.ts';
import type { DispatchOutcome, Fanout } from '../../../shared/ports/fanout.ts';
import type { EpisodeRequest, RewardRecord } from '../../../shared/schemas/index.ts';
import type { FsObjectStore } from '../../../shared/store/fs.ts';

/**
 * Writes each request's record at once: a member's reward depends on it and its task, base rows get 0.
 * `before(iteration)` is awaited first: a test holds an iteration open until a replica has served it.
 */
export function scriptedFanout(store: FsObjectStore, before?: (iteration: number) => Promise<void>): Fanout {
  return {
    async dispatch(requests) {
      for (const k of new Set(requests.map((r) => r.iteration))) await before?.(k);
      return Promise.all(
        requests.map(async (request: EpisodeRequest): Promise<DispatchOutcome> => {
          const { run, iteration, member } = request;
          const reward = member === 'base' ? 0 : ((member * 7 + request.task.id.length * 3 + iteration) % 5) / 5;
          const record: RewardRecord = {
            run, iteration, member, task: request.task.id, reward, steps: 1,
            tokens: { prompt: 0, completion: 0 }, durations: { episodeMs: 1, inferenceMs: 0 }, cost: { usd: 0, lambdaGbSeconds: 0, gpuSeconds: 0 },
            error: null, transcriptKey: null, writtenAt: new Date().toISOString(),
          };
          await store.put(keys.reward(run, iteration, member, request.task.id), JSON.stringify(record), { ifAbsent: true });
          return { request, ok: true };
        }),
      );
    },
    close: async () => {},
  };
}
