/** A small real iteration for the cloud tests: 4×4 sudoku tasks, played by a scripted policy or over HTTP. */
import { loadEnvironment } from '../../../environments/index.ts';
import { iterationRequests, type IterationPlan } from '../../../trainer/fanout/iteration-requests.ts';
import type { EpisodeRequest } from '../../../shared/schemas/index.ts';

export async function sudokuRequests(opts: { run?: string; iteration?: number; members: number; tasks: number; baseUrl?: string; deadlineMs?: number; tokenEnv?: string }): Promise<EpisodeRequest[]> {
  const sudoku = await loadEnvironment('sudoku');
  const options = { size: 4 as const };
  const plan: IterationPlan = {
    run: opts.run ?? 'cloud-test',
    iteration: opts.iteration ?? 0,
    runSeed: 7,
    members: Array.from({ length: opts.members }, (_, i) => i),
    tasks: sudoku.sampleTasks('train', opts.tasks, 3, sudoku.optionsSchema.parse(options)),
    environment: { name: 'sudoku', options },
    policy: { baseUrl: opts.baseUrl ?? 'scripted:oracle', ...(opts.tokenEnv ? { tokenEnv: opts.tokenEnv } : {}) },
    generation: { temperature: 0, topP: 1, topK: 0, maxTokens: 16 },
    deadline: new Date(Date.now() + (opts.deadlineMs ?? 60_000)),
  };
  return iterationRequests(plan);
}
