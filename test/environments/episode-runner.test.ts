import { describe, expect, it } from 'vitest';
import { runEpisode } from '../../environments/episode-runner.ts';
import type { Environment, StepResult } from '../../environments/environment.ts';
import { IterationClosedError } from '../../environments/policies/http-errors.ts';
import { scriptedPolicy } from '../../environments/policies/scripted.ts';
import { sudoku } from '../../environments/sudoku/definition.ts';
import type { ChatMessage, Policy, PolicyReply } from '../../shared/ports/policy.ts';

/** A counter environment: never done by itself; reward = number of "up" actions so far. */
class Counter implements Environment {
  readonly systemPrompt = 'say up';
  closed = 0;
  private count = 0;
  constructor(
    readonly horizon: number,
    private readonly failAt = -1,
    private readonly rewardOverride?: number,
  ) {}
  async reset(): Promise<string> {
    this.count = 0;
    return 'count 0';
  }
  async step(action: PolicyReply): Promise<StepResult> {
    if (this.failAt === this.count) throw new Error('environment broke');
    if (action.text === 'up') this.count++;
    return { observation: `count ${this.count}`, done: action.text === 'stop', reward: this.rewardOverride ?? this.count, info: {} };
  }
  async close(): Promise<void> {
    this.closed++;
  }
}

const reply = (text: string, extra: Partial<PolicyReply> = {}): PolicyReply => ({ text, tokens: { prompt: 10, completion: 2 }, inferenceMs: 5, ...extra });
const constant = (text: string): Policy => ({ act: async () => reply(text) });
/** A policy that waits until its signal aborts (a stuck inference server). */
const stuck: Policy = {
  act: (_m, { signal }) => new Promise((_resolve, reject) => signal?.addEventListener('abort', () => reject(signal.reason), { once: true })),
};

describe('runEpisode', () => {
  it('drives the policy for at most H steps, summing tokens and recording every observation and action', async () => {
    const env = new Counter(4);
    const r = await runEpisode({ environment: env, policy: constant('up'), seed: 0 });
    expect(r).toMatchObject({ reward: 4, steps: 4, stopReason: 'horizon', error: null, tokens: { prompt: 40, completion: 8 }, inferenceMs: 20 });
    expect(r.transcript.map((e) => e.kind)).toEqual(['system', 'observation', 'action', 'observation', 'action', 'observation', 'action', 'observation', 'action', 'observation']);
    expect(r.transcript.at(-1)).toMatchObject({ kind: 'observation', step: 4, text: 'count 4', reward: 4, done: false });
    expect(env.closed).toBe(1);
  });

  it('stops when the environment says done', async () => {
    const r = await runEpisode({ environment: new Counter(10), policy: scriptedPolicy(['up', 'up', 'stop'], 's'), seed: 0 });
    expect(r).toMatchObject({ reward: 2, steps: 3, stopReason: 'done', error: null });
  });

  it('shows the policy the whole chat, with a tool_calls reply spelled out as JSON', async () => {
    const seen: ChatMessage[][] = [];
    const policy: Policy = {
      async act(messages, { step }) {
        seen.push(messages);
        return step === 0 ? reply('', { toolCalls: [{ name: 'up', arguments: { by: 1 } }] }) : reply('up');
      },
    };
    await runEpisode({ environment: new Counter(2), policy, seed: 0 });
    expect(seen[1]).toEqual([
      { role: 'system', content: 'say up' },
      { role: 'user', content: 'count 0' },
      { role: 'assistant', content: '{"tool":"up","arguments":{"by":1}}' },
      { role: 'user', content: 'count 0' },
    ]);
  });

  it('a policy that throws ends the episode with the error, never a crash', async () => {
    let calls = 0;
    const policy: Policy = {
      async act() {
        if (++calls === 3) throw new Error('model exploded');
        return reply('up');
      },
    };
    const env = new Counter(10);
    const r = await runEpisode({ environment: env, policy, seed: 0 });
    expect(r).toMatchObject({ reward: 2, steps: 2, stopReason: 'error', error: 'model exploded' });
    expect(env.closed).toBe(1);
  });

  it('an environment that throws ends the episode with the error', async () => {
    const r = await runEpisode({ environment: new Counter(10, 1), policy: constant('up'), seed: 0 });
    expect(r).toMatchObject({ steps: 1, stopReason: 'error', error: 'environment broke' });
  });

  it('a non-finite reward is an error, never a reward', async () => {
    const r = await runEpisode({ environment: new Counter(1, -1, Number.NaN), policy: constant('up'), seed: 0 });
    expect(r.reward).toBe(0);
    expect(r.error).toMatch(/non-finite reward/);
  });

  it('an already aborted signal, or one aborted mid-inference, ends the episode as aborted', async () => {
    const before = new AbortController();
    before.abort(new Error('cancelled by caller'));
    expect(await runEpisode({ environment: new Counter(3), policy: constant('up'), seed: 0, signal: before.signal })).toMatchObject({
      steps: 0,
      stopReason: 'aborted',
      error: 'aborted: cancelled by caller',
    });
    const during = new AbortController();
    setTimeout(() => during.abort(new Error('shutdown')), 20);
    expect(await runEpisode({ environment: new Counter(3), policy: stuck, seed: 0, signal: during.signal })).toMatchObject({ stopReason: 'aborted', error: 'aborted: shutdown' });
  });

  it('a passed deadline ends the episode, before a step or in the middle of inference', async () => {
    const env = new Counter(3);
    expect(await runEpisode({ environment: env, policy: constant('up'), seed: 0, deadline: Date.now() - 1 })).toMatchObject({ steps: 0, stopReason: 'deadline', error: 'deadline: deadline passed' });
    expect(env.closed).toBe(1);
    expect(await runEpisode({ environment: new Counter(3), policy: stuck, seed: 0, deadline: new Date(Date.now() + 30) })).toMatchObject({ steps: 0, stopReason: 'deadline' });
  });

  it('a passed deadline also ends an environment step that hangs, or a policy deaf to its signal', async () => {
    class Hanging extends Counter {
      override step(): Promise<StepResult> {
        return new Promise(() => {});
      }
    }
    const env = new Hanging(3);
    expect(await runEpisode({ environment: env, policy: constant('up'), seed: 0, deadline: Date.now() + 30 })).toMatchObject({ steps: 0, stopReason: 'deadline' });
    expect(env.closed).toBe(1);
    const deaf: Policy = { act: () => new Promise(() => {}) };
    expect(await runEpisode({ environment: new Counter(3), policy: deaf, seed: 0, deadline: Date.now() + 30 })).toMatchObject({ steps: 0, stopReason: 'deadline' });
  });

  it('an iteration closed by the server ends the episode cleanly with its own stop reason', async () => {
    const policy: Policy = {
      async act(_m, { step }) {
        if (step === 1) throw new IterationClosedError('iteration 3 is closed');
        return reply('up');
      },
    };
    expect(await runEpisode({ environment: new Counter(5), policy, seed: 0 })).toMatchObject({ steps: 1, stopReason: 'iteration-closed', error: expect.stringMatching(/^iteration-closed: .*409/) });
  });

  it('validates a raw task with the definition, reporting field paths', async () => {
    const r = await runEpisode({ definition: sudoku, task: { puzzle: '1234', size: 4 }, policy: constant('x'), seed: 0 });
    expect(r.stopReason).toBe('error');
    expect(r.error).toMatch(/invalid sudoku task[\s\S]*16 cells, got 4[\s\S]*at puzzle/);
    const o = await runEpisode({ definition: sudoku, task: { puzzle: '..31.1..42131.24', size: 4 }, options: { invalidMove: 'sometimes' }, policy: constant('x'), seed: 0 });
    expect(o.error).toMatch(/invalid sudoku options[\s\S]*invalidMove/);
  });
});
