/**
 * MiniWoB++-protocol task pages served unmodified from a folder (test/fixtures/miniwob-protocol: pages of this
 * project's own following the protocol) and played in real Chromium: seeded as MiniWoB's harness seeds them,
 * the instruction from core.getUtterance(), the raw reward from the page's globals (success = raw > 0), and
 * MiniWoB's 10-second episode timer counting actions on the page's virtual clock, not the agent's thinking.
 */
import { existsSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import type { ChatMessage, Policy } from '../../shared/ports/policy.ts';
import { runEpisode } from '../../environments/episode-runner.ts';
import { web } from '../../environments/web/definition.ts';
import { folderFile } from '../../environments/web/task-folder.ts';
import { closeWebRuntime } from '../../environments/web/runtime.ts';

const DIR = new URL('../fixtures/miniwob-protocol', import.meta.url).pathname;
const chromium = existsSync('/usr/bin/chromium') || Boolean(process.env.ESOPT_CHROMIUM);
const options = (extra: Record<string, unknown> = {}) => web.optionsSchema.parse({ backend: 'chromium', actionTimeoutMs: 10_000, miniwob: { dir: DIR, ...extra } });
afterAll(() => closeWebRuntime());

const text = (m: ChatMessage[]) => String(m.at(-1)?.content ?? '');
/** Reads the goal and clicks the button it names: the way a competent agent would. */
function clickNamed(delayMs = 0): Policy {
  return {
    async act(messages) {
      if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
      const obs = text(messages);
      const word = /Click the button "([a-z]+)"/.exec(obs)?.[1];
      const id = word && new RegExp(`\\[(\\d+)\\] button "${word}"`).exec(obs)?.[1];
      return { text: id ? `click ${id}` : 'scroll down', tokens: { prompt: 0, completion: 0 }, inferenceMs: delayMs };
    },
  };
}
function clickWrong(): Policy {
  return {
    async act(messages) {
      const obs = text(messages);
      const word = /Click the button "([a-z]+)"/.exec(obs)![1];
      const other = [...obs.matchAll(/\[(\d+)\] button "([a-z]+)"/g)].find((m) => m[2] !== word)!;
      return { text: `click ${other[1]}`, tokens: { prompt: 0, completion: 0 }, inferenceMs: 0 };
    },
  };
}
const idle: Policy = { async act() { return { text: 'scroll down', tokens: { prompt: 0, completion: 0 }, inferenceMs: 0 }; } };

describe.skipIf(!chromium)('MiniWoB++-protocol pages in Chromium', () => {
  it('samples tasks from the folder, disjoint by split, and plays one to MiniWoB’s own reward', async () => {
    const o = options({ tasks: ['click-word'] });
    expect(web.sampleTasks('train', 30, 2, options()).map((t) => (t.task as { miniwob: string }).miniwob)).toEqual(expect.arrayContaining(['click-word', 'click-word-short', 'type-word', 'draw-circle']));
    const [train] = web.sampleTasks('train', 1, 1, o);
    expect(train!.task).toMatchObject({ miniwob: 'click-word' });
    expect(web.sampleTasks('eval', 5, 1, o).map((t) => t.id)).not.toContain(train!.id);
    const result = await runEpisode({ definition: web, task: train!.task, options: o, policy: clickNamed(), seed: 1 });
    expect(result.error).toBeNull();
    expect(result.reward).toBe(1);
    const last = result.transcript.at(-1)!;
    expect(last.kind === 'observation' && last.info).toMatchObject({ success: true, rawReward: 1, reason: 'right word' });
    // the time-decayed reward beside it: the click came at page time 0 (the clock moves after each action)
    expect(last.kind === 'observation' && last.info?.timeDecayedReward).toBe(1);
  }, 60_000);

  it('reports a wrong click as MiniWoB does: raw reward −1, not a success', async () => {
    const result = await runEpisode({ definition: web, task: { miniwob: 'click-word', seed: 7 }, options: options(), policy: clickWrong(), seed: 1 });
    expect(result.reward).toBe(-1);
    const last = result.transcript.at(-1)!;
    expect(last.kind === 'observation' && last.info).toMatchObject({ success: false, rawReward: -1, reason: 'wrong word' });
  }, 60_000);

  it('seeds the page: the same seed gives the same instruction, others differ', async () => {
    const goal = async (seed: number) => {
      const env = await web.create({ miniwob: 'click-word', seed }, options());
      try {
        return (await env.reset(0)).split('\n')[0];
      } finally {
        await env.close();
      }
    };
    const a = await goal(11);
    expect(await goal(11)).toBe(a);
    const others = new Set(await Promise.all([12, 13, 14, 15].map(goal)));
    expect(others.size).toBeGreaterThan(1);
  }, 60_000);

  it("runs MiniWoB's timer on actions, not on thinking: slow agents are not timed out, idle actions are", async () => {
    // A page with a 2-second limit: 2.5 s of thinking before the one action, and the page saw none of it.
    const slow = await runEpisode({ definition: web, task: { miniwob: 'click-word-short', seed: 3 }, options: options(), policy: clickNamed(2_500), seed: 1 });
    expect(slow.reward).toBe(1);
    const won = slow.transcript.at(-1)!;
    expect(won.kind === 'observation' && won.info?.timeDecayedReward).toBe(1);
    // Actions that do nothing: at the second (2 s of page time) its timer ends the episode with −1.
    const short = await runEpisode({ definition: web, task: { miniwob: 'click-word-short', seed: 3 }, options: options({ horizon: 20 }), policy: idle, seed: 1 });
    expect(short.steps).toBe(2);
    expect(short.reward).toBe(-1);
    // The default page: ten idle actions are its 10 seconds.
    const timedOut = await runEpisode({ definition: web, task: { miniwob: 'click-word', seed: 3 }, options: options({ horizon: 20 }), policy: idle, seed: 1 });
    expect(timedOut.steps).toBe(10);
    const last = timedOut.transcript.at(-1)!;
    expect(last.kind === 'observation' && last.info).toMatchObject({ success: false, rawReward: -1, reason: 'timed out' });
  }, 60_000);

  it('a canvas task the text view cannot serve: the agent sees no element, the page times it out', async () => {
    const result = await runEpisode({ definition: web, task: { miniwob: 'draw-circle', seed: 1 }, options: options(), policy: idle, seed: 1 });
    expect(result.reward).toBe(-1);
  }, 60_000);

  it('refuses a task the folder lacks, and a folder without html/miniwob', async () => {
    const missing = await runEpisode({ definition: web, task: { miniwob: 'no-such-task', seed: 1 }, options: options(), policy: idle, seed: 1 });
    expect(missing.error).toMatch(/no MiniWoB task page no-such-task\.html/);
    expect(() => web.sampleTasks('train', 1, 1, web.optionsSchema.parse({ miniwob: { dir: '/tmp' } }))).toThrow(/not a MiniWoB\+\+-layout folder/);
  }, 60_000);
});

describe('task folder files', () => {
  it('serves files inside the folder and nothing outside it', async () => {
    expect(await folderFile(DIR, 'html/core/core.js')).not.toBeNull();
    for (const escape of ['../README.md', '../../package.json', 'html/../../../package.json', '%2e%2e/%2e%2e/package.json', '/etc/passwd', 'html/core/missing.js', 'html']) {
      expect(await folderFile(`${DIR}/html`, escape), escape).toBeNull();
    }
  });
});
