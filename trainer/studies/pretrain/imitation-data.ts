/**
 * Supervised imitation data from an environment's scripted oracle: every turn of an oracle episode on a
 * train-split task becomes one sequence, the prompt exactly as the served model sees it (the chat the
 * episode runner builds, rendered with the model's chat template and cut from the left to the context
 * budget the engine keeps: contextLength − maxTokens) followed by the oracle's reply and the end-of-turn
 * token. Only the reply tokens are scored. Eval-split tasks are never used.
 */
import type { ChatMessage, Policy } from '../../../shared/ports/policy.ts';
import type { EnvironmentDefinition } from '../../../environments/environment.ts';
import { runEpisode } from '../../../environments/episode-runner.ts';
import type { ChatTokenizer } from '../../engine/model/chat-tokenizer.ts';
import type { LossSequence } from './decoder-gradient.ts';

export interface ImitationInput {
  definition: EnvironmentDefinition;
  /** Raw environment options (validated by the environment's schema). */
  options: unknown;
  taskCount: number;
  taskSeed: number;
  tokenizer: ChatTokenizer;
  contextLength: number;
  maxTokens: number;
  /** The token that ends an assistant turn (ChatML's <|im_end|>). */
  endOfTurnId: number;
  /**
   * Weight of next-token prediction on the prompt tokens (0: only the reply is scored). Predicting the
   * board's own characters teaches where in the grid each token sits and which digits a row already has,
   * which is what choosing a move needs; the reply tokens keep weight 1.
   */
  promptWeight?: number;
}

/** The oracle, recording the chat it was shown at every turn. */
class RecordingPolicy implements Policy {
  readonly turns: Array<{ messages: ChatMessage[]; reply: string }> = [];
  constructor(private readonly inner: Policy) {}
  async act(messages: ChatMessage[], context: Parameters<Policy['act']>[1]) {
    const reply = await this.inner.act(messages, context);
    this.turns.push({ messages, reply: reply.text });
    return reply;
  }
}

export async function imitationSequences(input: ImitationInput): Promise<LossSequence[]> {
  const { definition, tokenizer } = input;
  const options = definition.optionsSchema.parse(input.options);
  const budget = input.contextLength - input.maxTokens;
  if (budget < 1) throw new RangeError(`maxTokens ${input.maxTokens} leaves no room for a prompt in a context of ${input.contextLength}`);
  const out: LossSequence[] = [];
  for (const sampled of definition.sampleTasks('train', input.taskCount, input.taskSeed, options)) {
    const policy = new RecordingPolicy(definition.oracle(sampled.task, options));
    const result = await runEpisode({ definition, task: sampled.task, options, policy, seed: 0 });
    if (result.error) throw new Error(`oracle episode on ${sampled.id} failed: ${result.error}`);
    for (const turn of policy.turns) {
      let prompt = tokenizer.encodeChat(turn.messages);
      if (prompt.length > budget) prompt = prompt.slice(prompt.length - budget);
      const completion = [...tokenizer.encode(turn.reply), input.endOfTurnId];
      if (completion.length > input.maxTokens) throw new RangeError(`the oracle's reply ${JSON.stringify(turn.reply)} needs ${completion.length} tokens, more than maxTokens ${input.maxTokens}`);
      const ids = [...prompt, ...completion];
      const reply = completion.map((_, j) => prompt.length - 1 + j);
      const promptWeight = input.promptWeight ?? 0;
      if (promptWeight > 0) {
        const context = Array.from({ length: prompt.length - 1 }, (_, j) => j);
        out.push({ ids, targets: [...context, ...reply], weights: [...context.map(() => promptWeight), ...reply.map(() => 1)] });
      } else out.push({ ids, targets: reply });
    }
  }
  return out;
}
