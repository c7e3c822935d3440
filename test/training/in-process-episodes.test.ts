/**
 * localEpisodes: 'in-process' plays the same episodes as the worker pool: same records (rewards, steps,
 * token counts), same updates, same θ, with sampling on (so the seed derivation is the HTTP path's);
 * a row the engine refuses fails its own episode only; chat tools are refused by name.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { keys } from '../../shared/keys.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { RewardRecord, RunConfig, type EpisodeRequest } from '../../shared/schemas/index.ts';
import { loadEnvironment } from '../../environments/index.ts';
import { InProcessFanout } from '../../trainer/fanout/in-process.ts';
import { createEngine } from '../../trainer/engine/model/create-engine.ts';
import { runEmbedded } from '../../trainer/assembly/run.ts';
import { silentProgress } from '../../trainer/training/loop/progress.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-in-process-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const modelDir = fileURLToPath(new URL('../../models/sudoku-4x4-demo', import.meta.url));

const config = (localEpisodes: 'worker-processes' | 'in-process') =>
  RunConfig.parse({
    environment: { name: 'sudoku', options: { size: 4, blanks: 6, invalidMove: 'waste', observation: 'next-cell', constrainActions: true, shapedReward: true } },
    tasks: { seed: 1, trainPerIteration: 3, evalCount: 4 },
    model: { dir: modelDir },
    localEpisodes,
    es: { population: 4, sigma: 0.05, alpha: 0.05 },
    // Sampled: the members' moves depend on the per-turn seeds, which both paths must derive alike.
    generation: { temperature: 1, topP: 1, topK: 0, maxTokens: 12 },
    iterations: 2,
    evalInterval: 2,
    checkpointInterval: 2,
    workers: 4,
    seed: 3,
  });

/** Every reward record of a run, by key, without the fields that only say when and how long. */
function records(storeRoot: string, run: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const dir = join(storeRoot, 'runs', run, 'iterations');
  for (const k of readdirSync(dir)) {
    const rewards = join(dir, k, 'rewards');
    for (const f of readdirSync(rewards, { recursive: true }) as string[]) {
      if (!f.endsWith('.json')) continue;
      const r = RewardRecord.parse(JSON.parse(readFileSync(join(rewards, f), 'utf8')));
      out[`${k}/${f}`] = { reward: r.reward, steps: r.steps, tokens: r.tokens, error: r.error };
    }
  }
  return out;
}

describe('in-process episodes (localEpisodes)', () => {
  it('defaults to worker processes and refuses an unknown value with its path', () => {
    const base = { environment: { name: 'sudoku' }, model: { preset: 'tiny' }, es: { population: 4, sigma: 0.1, alpha: 0.1 }, iterations: 1 };
    expect(RunConfig.parse(base).localEpisodes).toBe('worker-processes');
    const bad = RunConfig.safeParse({ ...base, localEpisodes: 'threads' });
    expect(bad.success).toBe(false);
    expect(bad.error?.issues[0].path).toEqual(['localEpisodes']);
  });

  it('plays exactly the episodes the worker pool plays: same records, updates and θ', async () => {
    const reports = [];
    for (const where of ['worker-processes', 'in-process'] as const) {
      const { report } = await runEmbedded({ config: config(where), run: where, storeRoot: join(root, where), progress: silentProgress });
      reports.push(report);
    }
    const [pool, inProcess] = reports;
    const a = records(join(root, 'worker-processes'), 'worker-processes');
    const b = records(join(root, 'in-process'), 'in-process');
    expect(Object.keys(a).length).toBe(2 * 4 * 3 + 2 * 4);
    expect(b).toEqual(a);
    expect(inProcess.thetaHash).toBe(pool.thetaHash);
    expect(inProcess.evaluations.map((e) => e.meanReward)).toEqual(pool.evaluations.map((e) => e.meanReward));
    // The members did differ (sampled, perturbed), so the comparison had something to catch.
    expect(new Set(Object.values(a).map((r) => (r as { reward: number }).reward)).size).toBeGreaterThan(1);
  }, 180_000);

  it('fails only the episode whose row the engine refuses, and names chat tools as unsupported', async () => {
    const store = new FsObjectStore(join(root, 'direct'));
    const engine = await createEngine({ model: { dir: modelDir }, mode: 'full', contextPolicy: 'truncate-left' });
    const fanout = new InProcessFanout(store);
    await expect(fanout.dispatch([], { concurrency: 1, timeoutMs: 1000 })).rejects.toThrow(/no engine yet/);
    fanout.useEngine(engine);
    try {
      const sudoku = await loadEnvironment('sudoku');
      const sudokuOptions = { size: 4, blanks: 6, observation: 'next-cell', constrainActions: true };
      const [task] = sudoku.sampleTasks('eval', 1, 1, sudoku.optionsSchema.parse(sudokuOptions));
      const tools = await loadEnvironment('tools');
      const toolsOptions = { toolCalls: true };
      const [toolTask] = tools.sampleTasks('eval', 1, 1, tools.optionsSchema.parse(toolsOptions));
      const deadline = new Date(Date.now() + 60_000).toISOString();
      const request = (member: EpisodeRequest['member'], t: { id: string; task: unknown }, environment: EpisodeRequest['environment']): EpisodeRequest => ({
        run: 'direct',
        iteration: 0,
        member,
        task: { id: t.id, value: t.task },
        environment,
        policy: { baseUrl: 'http://127.0.0.1:9/v1', model: member === 'base' ? 'base' : `member-0-${member}` },
        generation: { temperature: 0, topP: 1, topK: 0, maxTokens: 12 },
        seed: 1,
        deadline,
      });
      // No population is set, so member 0 is refused by the engine; base plays; the tools episode is refused.
      const requests = [request('base', task, { name: 'sudoku', options: sudokuOptions }), request(0, task, { name: 'sudoku', options: sudokuOptions }), request('base', toolTask, { name: 'tools', options: toolsOptions })];
      const outcomes = await fanout.dispatch(requests, { concurrency: 3, timeoutMs: 60_000 });
      expect(outcomes.map((o) => o.ok)).toEqual([true, true, true]);
      const read = async (r: EpisodeRequest) => RewardRecord.parse(JSON.parse(new TextDecoder().decode((await store.get(keys.reward(r.run, r.iteration, r.member, r.task.id)))!)));
      const [base, member, tool] = await Promise.all(requests.map(read));
      expect(base.error).toBeNull();
      expect(base.steps).toBeGreaterThan(0);
      expect(member.error).toMatch(/member-0-0 is not in the current population/);
      expect(tool.error).toMatch(/offers chat tools, which in-process episodes do not serve/);
    } finally {
      await fanout.close();
      await engine.close();
    }
  }, 60_000);
});
