/** `esopt dev cloud` end to end through the CLI entry point, faults on: the counts must add up. */
import { describe, expect, it } from 'vitest';
import { sudoku } from '../../environments/sudoku/definition.ts';
import { closeWebRuntime } from '../../environments/web/runtime.ts';
import { main } from '../../trainer/cli/main.ts';
import { startAgentServer } from '../api/agent-server.ts';

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  return { out, err, io: { stdout: (t: string) => out.push(t), stderr: (t: string) => err.push(t), readStdin: async () => '' } };
}

describe('esopt dev cloud', () => {
  it('with faults: every distinct (member, task) counted once, duplicates and throttles absorbed', async () => {
    const { out, io } = capture();
    const code = await main(['dev', 'cloud', '--episodes', '24', '--faults', '--seed', '4', '--json'], io);
    const report = JSON.parse(out.join(''));
    expect(code).toBe(0);
    expect(report).toMatchObject({ episodes: 24, records: 24, counted: 24, failed: 0, complete: true, invalid: 0 });
    expect(report.faults.throttled + report.faults.server_errors).toBeGreaterThan(0);
    expect(report.faults.duplicate_deliveries).toBeGreaterThan(0);
    expect(report.duplicates_ignored).toBe(report.faults.duplicate_deliveries);
    expect(report.faults.deliveries).toBe(24 + report.faults.duplicate_deliveries);
  });

  it('--env web: one ES iteration of web episodes in the Lambda Chromium, the model reached over the pinned TLS link', async () => {
    const { out, io } = capture();
    const saved = process.env.ESOPT_CHROMIUM;
    delete process.env.ESOPT_CHROMIUM;
    try {
      const code = await main(['dev', 'cloud', '--env', 'web', '--population', '2', '--tasks', '1', '--seed', '3', '--json'], io);
      const report = JSON.parse(out.join(''));
      expect(code).toBe(0);
      // Two members on one task, and the evaluations of θ_0 and θ_1 (one task each): every record written, none failed.
      expect(report).toMatchObject({ env: 'web', episodes: 4, records: 4, failed: 0, chromium: 'lambda', update: { counted: 2 } });
      expect(report.link.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+\/v1$/);
      expect(report.completion_tokens).toBeGreaterThan(0);
      expect(report.invoke_calls).toBeGreaterThanOrEqual(3);
    } finally {
      if (saved === undefined) delete process.env.ESOPT_CHROMIUM;
      else process.env.ESOPT_CHROMIUM = saved;
      // The command leaves its in-process browser to the process's exit; the next file in this worker must not inherit it.
      await closeWebRuntime();
    }
  }, 300_000);

  it('--replicas 2: a run over the coordinator and a replica box, each server pinned to its own announced certificate', async () => {
    const { out, io } = capture();
    const code = await main(['dev', 'cloud', '--replicas', '2', '--population', '4', '--iterations', '2', '--seed', '5', '--json'], io);
    const report = JSON.parse(out.join(''));
    expect(code).toBe(0);
    expect(report.failed).toBe(0);
    expect(report.episodes).toBeGreaterThan(0);
    // The replica box reported θ_0 while the coordinator waited for it: every iteration is routed over both.
    expect(report.routed).toEqual([['coordinator', 'replica-1'], ['coordinator', 'replica-1']]);
    expect(report.replica_theta).toEqual({ 'replica-1': report.theta });
    const [coordinator, replica] = report.boxes;
    expect(new URL(coordinator.url).origin).not.toBe(new URL(replica.url).origin);
    expect(replica.sha256).toMatch(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
    expect(replica.sha256).not.toBe(coordinator.sha256);
  }, 120_000);

  it('--evaluate: a keyed evaluation through the Api app, SSM, the trainer box and the Episode handler; the key found nowhere', async () => {
    const key = 'sk-dev-cloud-4b8e0c1f9a';
    const tasks = sudoku.sampleTasks('eval', 3, 2, sudoku.optionsSchema.parse({ size: 4, blanks: 2 }));
    const agent = await startAgentServer(key, tasks, () => true);
    const saved = process.env.ESOPT_EVAL_KEY;
    process.env.ESOPT_EVAL_KEY = key;
    try {
      const { out, io } = capture();
      const code = await main(['dev', 'cloud', '--evaluate', agent.baseUrl, '--model', 'theirs', '--episodes', '3', '--seed', '2', '--json'], io);
      const report = JSON.parse(out.join(''));
      expect(report).toMatchObject({ state: 'finished', error: null, episodes: 3, failed: 0, mean_reward: 1, ssm: { put: 1, delete: 1, left: 0 }, key_found_in: [] });
      expect(report.ssm.get).toBeGreaterThanOrEqual(1);
      expect(report.objects_searched).toBeGreaterThan(5);
      expect(code).toBe(0);
      // The agent answers 401 to anything but its key.
      expect(agent.unauthorized).toBe(0);
      expect(agent.calls.length).toBeGreaterThanOrEqual(3);
    } finally {
      if (saved === undefined) delete process.env.ESOPT_EVAL_KEY;
      else process.env.ESOPT_EVAL_KEY = saved;
      await agent.close();
    }
  }, 120_000);

  it('rejects a bad flag with exit code 2, naming it', async () => {
    const { err, io } = capture();
    expect(await main(['dev', 'cloud', '--episodes', '0'], io)).toBe(2);
    expect(err.join('')).toMatch(/--episodes/);
    expect(await main(['dev', 'cloud', '--env', 'mars'], io)).toBe(2);
    expect(err.join('')).toMatch(/--env/);
    expect(await main(['dev', 'cloud', '--replicas', '1'], io)).toBe(2);
    expect(err.join('')).toMatch(/--replicas/);
    expect(await main(['dev', 'cloud', '--evaluate', 'http://127.0.0.1:9/v1'], io)).toBe(2);
    expect(err.join('')).toMatch(/--model is required/);
    const saved = process.env.ESOPT_EVAL_KEY;
    delete process.env.ESOPT_EVAL_KEY;
    try {
      expect(await main(['dev', 'cloud', '--evaluate', 'http://127.0.0.1:9/v1', '--model', 'm'], io)).toBe(2);
      expect(err.join('')).toMatch(/ESOPT_EVAL_KEY is not set/);
    } finally {
      if (saved !== undefined) process.env.ESOPT_EVAL_KEY = saved;
    }
  });
});
