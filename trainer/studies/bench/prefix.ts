/**
 * `esopt bench prefix`: one multi-turn episode played in-process (runEpisode over a ModelPolicy, as the
 * in-process fan-out plays them) by an engine with the prefix cache and by one without: the episode's wall
 * time, and the tokens each prefilled ÷ the episode's tokens (its last prompt and reply). Greedy, so both
 * decode the same replies (checked). Each round plays another member, so no round reuses another's K/V.
 */
import { z } from 'zod';
import { ask } from '../../../shared/es.ts';
import type { Policy } from '../../../shared/ports/policy.ts';
import { runEpisode, type EpisodeInput } from '../../../environments/episode-runner.ts';
import { sudoku } from '../../../environments/sudoku/definition.ts';
import { SudokuOptions } from '../../../environments/sudoku/task.ts';
import { modelSpecFlag } from '../../engine/model/presets.ts';
import type { Engine } from '../../engine/engine.ts';
import { openEngine } from '../../assembly/engine.ts';
import { ModelPolicy } from '../../engine/model/model-policy.ts';
import type { Log } from './benchmark.ts';
import { machineInfo, median } from './measure.ts';
import { int, ModelName, Provider, Repeats, Threads } from './options.ts';
import { ScriptedEpisode } from './scripted-episode.ts';

export const options = z.object({
  model: ModelName('small'),
  mode: z.enum(['lowrank', 'full']).default('lowrank'),
  /**
   * `scripted`: a made-up game whose turns append one short line (fits `small`'s 2,048 positions);
   * `sudoku`: a 9×9 sudoku with one blank a turn, the next cell shown and the move format forced (a real
   * environment's episode, for models with the context it needs).
   */
  episode: z.enum(['scripted', 'sudoku']).default('scripted'),
  turns: int(2, 80).default(15),
  newTokens: int(1, 256).default(24),
  repeats: Repeats(3),
  threads: Threads,
  provider: Provider,
});
type Options = z.output<typeof options>;

interface Played {
  ms: number;
  turns: Array<{ prompt: number; cached: number; completion: number }>;
  replies: string[];
}

function episodeOf(o: Options, policy: Policy): EpisodeInput {
  if (o.episode === 'scripted') return { environment: new ScriptedEpisode(o.turns), seed: 0, policy };
  const sudokuOptions = SudokuOptions.parse({ size: 9, blanks: o.turns, horizon: o.turns, observation: 'next-cell', constrainActions: true, invalidMove: 'waste' });
  const [task] = sudoku.sampleTasks('train', 1, 1, sudokuOptions);
  return { definition: sudoku, task: task.task, options: sudokuOptions, seed: 0, policy };
}

async function play(engine: Engine, o: Options, index: number): Promise<Played> {
  const policy = new ModelPolicy(engine, { member: { kind: 'member', iteration: 0, index }, episode: 0, sampling: { temperature: 0, topP: 1, topK: 0 }, maxNewTokens: o.newTokens });
  const t0 = performance.now();
  const result = await runEpisode(episodeOf(o, policy));
  const ms = performance.now() - t0;
  if (result.error) throw new Error(`the ${o.episode} episode failed: ${result.error}`);
  const actions = result.transcript.flatMap((e) => (e.kind === 'action' ? [e] : []));
  if (actions.length !== o.turns) throw new Error(`the ${o.episode} episode ended after ${actions.length} of ${o.turns} turns (${result.stopReason})`);
  return { ms, turns: actions.map((a) => ({ prompt: a.tokens.prompt, cached: a.tokens.cached ?? 0, completion: a.tokens.completion })), replies: actions.map((a) => a.text) };
}

/** Tokens an episode prefilled: each turn's prompt less what the cache served. */
const prefilled = (p: Played) => p.turns.reduce((a, t) => a + t.prompt - t.cached, 0);

export async function run(o: Options, log: Log) {
  const spec = modelSpecFlag(o.model, 0);
  const population = { runSeed: 1, iteration: 0, sigma: 0.01, rank: 1, members: ask({ population: 2 * (o.repeats + 1), antithetic: true }) };
  const made = { executionProvider: o.provider, threads: o.threads, contextPolicy: 'error' as const };
  const cached = await openEngine({ model: spec, mode: o.mode, ...made });
  const plain = await openEngine({ model: spec, mode: o.mode, ...made, prefixCacheBytes: 0 });
  try {
    for (const e of [cached, plain]) e.setPopulation(population);
    log(`warm-up: one ${o.turns}-turn ${o.episode} episode each, then ${o.repeats} interleaved rounds`);
    await play(cached, o, 0);
    await play(plain, o, 0);
    const withCache: Played[] = [];
    const without: Played[] = [];
    for (let r = 1; r <= o.repeats; r++) {
      // alternate which goes first so drift in machine load hits both alike
      if (r % 2 === 1) {
        withCache.push(await play(cached, o, r));
        without.push(await play(plain, o, r));
      } else {
        without.push(await play(plain, o, r));
        withCache.push(await play(cached, o, r));
      }
      log(`  round ${r}: with the cache ${withCache.at(-1)!.ms.toFixed(0)} ms, without ${without.at(-1)!.ms.toFixed(0)} ms`);
    }
    const last = withCache.at(-1)!;
    const final = last.turns.at(-1)!;
    const episodeTokens = final.prompt + final.completion;
    const side = (runs: Played[]) => ({ wall_ms: median(runs.map((p) => p.ms)), prefilled_tokens: prefilled(runs.at(-1)!), prefilled_per_episode_token: prefilled(runs.at(-1)!) / episodeTokens });
    return {
      model: o.model,
      mode: o.mode,
      episode: o.episode,
      turns: o.turns,
      new_tokens: o.newTokens,
      repeats: o.repeats,
      provider: o.provider,
      episode_tokens: episodeTokens,
      prompt_tokens: last.turns.reduce((a, t) => a + t.prompt, 0),
      cached_tokens: last.turns.reduce((a, t) => a + t.cached, 0),
      without_cache: side(without),
      with_cache: side(withCache),
      wall_ratio: median(withCache.map((p) => p.ms)) / median(without.map((p) => p.ms)),
      same_replies: withCache.every((p, i) => JSON.stringify(p.replies) === JSON.stringify(without[i].replies)),
      per_turn: last.turns,
      rounds_ms: { with_cache: withCache.map((p) => Math.round(p.ms)), without_cache: without.map((p) => Math.round(p.ms)) },
      machine: machineInfo(),
    };
  } finally {
    await Promise.all([cached.close(), plain.close()]);
  }
}
