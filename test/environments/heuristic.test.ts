/** The heuristic-design environment: scoring against the baselines, the multi-turn protocol, failures as reward 0, policies. */
import { describe, expect, it } from 'vitest';
import { runEpisode } from '../../environments/episode-runner.ts';
import { heuristic } from '../../environments/heuristic/definition.ts';
import { HeuristicOptions, type HeuristicTask } from '../../environments/heuristic/task.ts';
import { scriptedPolicy } from '../../environments/policies/scripted.ts';

const options = HeuristicOptions.parse({});
const js = (code: string) => '```js\n' + code + '\n```';

function play(task: HeuristicTask, actions: string[], opts: Record<string, unknown> = {}) {
  return runEpisode({ definition: heuristic, task, options: opts, policy: scriptedPolicy(actions, 'test script'), seed: 0 });
}

describe('heuristic environment', () => {
  it('scores first-fit and nearest neighbour (written by the agent) as exactly 1', async () => {
    const ff = await play({ problem: 'bin-packing', seed: 7 }, [js('function priority(item, bins) { return bins.map(() => 0); }'), 'done']);
    expect(ff.reward).toBe(1);
    const nn = await play({ problem: 'tsp', seed: 7 }, [
      js('function nextCity(c, u) { let b = 0; u.forEach((p, i) => { if (Math.hypot(p[0]-c[0], p[1]-c[1]) < Math.hypot(u[b][0]-c[0], u[b][1]-c[1])) b = i; }); return b; }'),
      'done',
    ]);
    expect(nn.reward).toBeCloseTo(1, 12);
  });

  it('the oracle (best-fit; nearest neighbour that finishes near the start, then plain) scores at least the baseline', async () => {
    for (const problem of ['bin-packing', 'tsp'] as const) {
      const tasks = heuristic.sampleTasks('eval', 4, 3, { ...options, problems: [problem] });
      let sum = 0;
      for (const { task } of tasks) {
        const result = await runEpisode({ definition: heuristic, task, options, policy: heuristic.oracle(task, options), seed: 0 });
        expect(result.error).toBeNull();
        expect(result.reward).toBeGreaterThan(problem === 'tsp' ? 0.99999 : 0.99);
        sum += result.reward;
      }
      expect(sum / tasks.length).toBeGreaterThanOrEqual(1);
    }
  });

  it('a deliberately bad heuristic scores below the baseline', async () => {
    // Worst-fit: always the emptiest bin, which opens far more bins.
    const worst = await play({ problem: 'bin-packing', seed: 7 }, [js('function priority(item, bins) { return bins.map((r, i) => i === bins.length - 1 ? -1 : r); }'), 'done']);
    expect(worst.reward).toBeGreaterThan(0);
    expect(worst.reward).toBeLessThan(0.97);
  });

  it('failures score 0 with the reason in the transcript, and the agent may resubmit; the reward is the best score', async () => {
    const task: HeuristicTask = { problem: 'bin-packing', seed: 1 };
    const result = await play(task, [
      js('function priority(item, bins) { return this.constructor.constructor("return process")().exit(1); }'),
      js('function priority(item, bins) { for (;;) {} }'),
      js('function priority(item, bins) { return 3; }'),
      'I think I am done but forgot the code',
      js('function priority(item, bins) { return bins.map((r) => item - r); }'),
      js('function priority(item, bins) { return bins.map(() => 0); }'),
    ], { submissions: 6 });
    const observations = result.transcript.filter((e) => e.kind === 'observation').map((e) => e.text);
    expect(observations[1]).toMatch(/scored 0: priority\(\) threw: process is not defined/);
    expect(observations[2]).toMatch(/scored 0: priority\(\) ran longer than 100 ms/);
    expect(observations[3]).toMatch(/scored 0: priority\(\d+, \[.*\]\) must return an array of \d+ numbers/);
    expect(observations[4]).toMatch(/no code found/);
    expect(observations[5]).toMatch(/scored 1\.0\d{3}/);
    expect(observations[6]).toMatch(/scored 1\.0000/);
    expect(result.stopReason).toBe('done');
    expect(result.steps).toBe(6);
    // Best-fit beat first-fit on this task, and the later, worse submission does not lower the reward.
    expect(result.reward).toBeGreaterThan(1);
    const scores = result.transcript.flatMap((e) => (e.kind === 'observation' && typeof e.info?.score === 'number' ? [e.info.score] : []));
    expect(result.reward).toBe(Math.max(...scores));
  });

  it('a memory blow-up is reward 0, not a crash', async () => {
    const result = await play({ problem: 'tsp', seed: 2 }, [js('function nextCity() { let s = "x"; for (;;) s = s + s; }')], { submissions: 1, perCallMs: 10_000, totalMs: 20_000 });
    expect(result.error).toBeNull();
    expect(result.reward).toBe(0);
    expect(result.transcript.at(-1)).toMatchObject({ kind: 'observation', done: true });
    expect((result.transcript.at(-1) as { text: string }).text).toMatch(/memory limit|threw: .*(Invalid string length|memory)/);
  });

  it('samples disjoint, deterministic train and eval tasks; rejects bad tasks', () => {
    const train = heuristic.sampleTasks('train', 20, 5, options);
    const evalTasks = heuristic.sampleTasks('eval', 20, 5, options);
    expect(heuristic.sampleTasks('train', 20, 5, options)).toEqual(train);
    const ids = new Set(train.map((t) => t.id));
    expect(evalTasks.some((t) => ids.has(t.id))).toBe(false);
    expect(new Set(train.map((t) => t.task.problem))).toEqual(new Set(['bin-packing', 'tsp']));
    expect(heuristic.taskSchema.safeParse({ problem: 'knapsack', seed: 1 }).success).toBe(false);
    expect(heuristic.optionsSchema.safeParse({ memoryMb: 4 }).success).toBe(false);
  });

  it('the random policy submits legal code that gets a positive score', async () => {
    const task: HeuristicTask = { problem: 'tsp', seed: 4 };
    const result = await runEpisode({ definition: heuristic, task, options, policy: heuristic.random(task, options, 9), seed: 0 });
    expect(result.error).toBeNull();
    expect(result.steps).toBe(options.submissions);
    expect(result.reward).toBeGreaterThan(0.5);
    const again = await runEpisode({ definition: heuristic, task, options, policy: heuristic.random(task, options, 9), seed: 0 });
    expect(again.reward).toBe(result.reward);
  });
});
