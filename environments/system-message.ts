/**
 * An episode's system message: its environment's own prompt (the action format), or the run's instructions
 * (c_t) composed around it. The system text replaces the prompt, and names the place it wants the
 * environment's prompt kept with `{{environment}}`; the skill documents follow as sections, in their order.
 * Without instructions the message is exactly the environment's prompt, so older runs see what they saw.
 */
import { ENVIRONMENT_PROMPT_SLOT, type Instructions } from '../shared/schemas/index.ts';

export function systemMessage(environmentPrompt: string, instructions?: Instructions): string {
  if (!instructions) return environmentPrompt;
  const head = instructions.system === undefined ? environmentPrompt : instructions.system.split(ENVIRONMENT_PROMPT_SLOT).join(environmentPrompt);
  return [head, ...instructions.skills.map((s) => `## Skill: ${s.name}\n\n${s.text}`)].join('\n\n');
}
