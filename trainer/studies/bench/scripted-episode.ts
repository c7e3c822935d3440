/**
 * A scripted multi-turn environment for benchmarks: every observation is the next move of a made-up board
 * game (the same for every policy and seed), whatever the policy replied, so an episode always runs its
 * whole horizon and each turn's prompt is the last one plus the reply and one short observation — the
 * shape of an environment's episode, at a length that fits a small model's context.
 */
import type { Environment, StepResult } from '../../../environments/environment.ts';

export class ScriptedEpisode implements Environment {
  readonly systemPrompt = 'You keep the notes of a board game. Each turn you hear the latest move; answer with one short line.';
  private turn = 0;

  constructor(readonly horizon: number) {}

  async reset(): Promise<string> {
    this.turn = 0;
    return this.move();
  }

  async step(): Promise<StepResult> {
    this.turn++;
    const done = this.turn >= this.horizon;
    return { observation: done ? 'The game is over.' : this.move(), done, ...(done ? { reward: 0 } : {}), info: {} };
  }

  async close(): Promise<void> {}

  /** Turn k's move: a stone on a 9×9 board and the running score, from k alone. */
  private move(): string {
    const k = this.turn;
    const player = k % 2 === 0 ? 'Black' : 'White';
    const at = `${'ABCDEFGHJ'[(k * 5 + 2) % 9]}${((k * 7 + 3) % 9) + 1}`;
    return `Move ${k + 1}: ${player} ${at}, score ${Math.floor(k / 2)}-${Math.floor((k + 1) / 2)}.`;
  }
}
