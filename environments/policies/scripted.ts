/**
 * Policies without a model: a fixed script of action texts (the oracles and `replay:FILE`), and a
 * seeded chooser (the random policies). Both report zero tokens and zero inference time.
 */
import type { ChatMessage, Policy, PolicyReply } from '../../shared/ports/policy.ts';
import { SeededRandom, deriveSeed } from '../random.ts';

function reply(text: string): PolicyReply {
  return { text, tokens: { prompt: 0, completion: 0 }, inferenceMs: 0 };
}

/** Plays `actions[step]` at each step; running past the end of the script is an error. */
export function scriptedPolicy(actions: readonly string[], label: string): Policy {
  return {
    async act(_messages, { step }) {
      if (step >= actions.length) throw new Error(`${label} has only ${actions.length} action(s); the episode asked for action ${step + 1}`);
      return reply(actions[step]);
    },
  };
}

/**
 * Asks `choose` for each action with randomness that depends only on (seed, step), so a random
 * episode replays exactly. `choose` may keep state across the steps of its one episode.
 */
export function seededPolicy(seed: number, choose: (random: SeededRandom, step: number, messages: ChatMessage[]) => string): Policy {
  return {
    async act(messages, { step }) {
      return reply(choose(new SeededRandom(deriveSeed(seed, step)), step, messages));
    },
  };
}
