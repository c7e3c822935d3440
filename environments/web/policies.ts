/** The web scripted policies: the oracle follows its task's plan against the live view; random plays legal-looking actions. */
import type { ChatMessage, Policy } from '../../shared/ports/policy.ts';
import { seededPolicy } from '../policies/scripted.ts';
import type { SeededRandom } from '../random.ts';
import { KEYS } from './action.ts';
import { attribute, parsePageView } from './page-view.ts';
import type { OracleStep } from './task-type.ts';
import { WORDS } from './vocabulary.ts';

const lastObservation = (messages: ChatMessage[]) => [...messages].reverse().find((m) => m.role === 'user')?.content ?? '';

/** Plays `plan` step by step, each resolved against the latest observation; "done" once it is through. */
export function oraclePolicy(plan: readonly OracleStep[]): Policy {
  let index = 0;
  return {
    async act(messages) {
      const view = parsePageView(lastObservation(messages));
      let text = 'done';
      while (index < plan.length) {
        const move = plan[index](view);
        if (move === null) {
          index++;
          continue;
        }
        if (move.advance) index++;
        text = move.action;
        break;
      }
      return { text, tokens: { prompt: 0, completion: 0 }, inferenceMs: 0 };
    },
  };
}

/** A random action on a random element of the view (or a scroll, a key, rarely done). */
function randomAction(random: SeededRandom, observation: string): string {
  const view = parsePageView(observation);
  const roll = random.float();
  if (view.elements.length === 0 || roll < 0.1) return random.pick(['scroll down', 'scroll up', `press ${random.pick(KEYS)}`]);
  if (roll < 0.12) return 'done';
  const element = random.pick(view.elements);
  switch (element.role) {
    case 'textbox':
    case 'password':
      return `type ${element.id} ${JSON.stringify(random.pick(WORDS))}`;
    case 'select': {
      const options = (attribute(element, 'options') ?? '').split(' | ').filter((o) => o !== '');
      return options.length ? `select ${element.id} ${JSON.stringify(random.pick(options))}` : `click ${element.id}`;
    }
    case 'checkbox':
    case 'radio':
      return random.float() < 0.5 ? `check ${element.id}` : `click ${element.id}`;
    default:
      return `click ${element.id}`;
  }
}

export function randomPolicy(seed: number): Policy {
  return seededPolicy(seed, (random, _step, messages) => randomAction(random, lastObservation(messages)));
}
