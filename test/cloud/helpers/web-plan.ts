/** One web iteration for the cloud tests: one task of every task type (or the given ones), played by a scripted policy or over HTTP. */
import { iterationRequests } from '../../../trainer/fanout/iteration-requests.ts';
import { TASK_TYPE_NAMES } from '../../../environments/web/task-types/index.ts';
import type { EpisodeRequest, MemberRef } from '../../../shared/schemas/index.ts';

export function webRequests(opts: { run?: string; members?: MemberRef[]; types?: string[]; baseUrl?: string; tokenEnv?: string; deadlineMs?: number } = {}): EpisodeRequest[] {
  const types = opts.types ?? TASK_TYPE_NAMES;
  return iterationRequests({
    run: opts.run ?? 'web-cloud-test',
    iteration: 0,
    runSeed: 5,
    members: opts.members ?? ['base'],
    tasks: types.map((type) => ({ id: `web-${type}`, task: { type, seed: 11 } })),
    environment: { name: 'web', options: { backend: 'chromium' } },
    policy: { baseUrl: opts.baseUrl ?? 'scripted:oracle', ...(opts.tokenEnv ? { tokenEnv: opts.tokenEnv } : {}) },
    generation: { temperature: 0, topP: 1, topK: 0, maxTokens: 24 },
    deadline: new Date(Date.now() + (opts.deadlineMs ?? 120_000)),
  });
}
