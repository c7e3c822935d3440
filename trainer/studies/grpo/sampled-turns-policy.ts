/**
 * The Policy port on an Engine that keeps what policy gradient needs: every turn's prompt token ids
 * (rendered and cut from the left exactly as the engine would) and the completion token ids it sampled.
 */
import type { ChatMessage, Policy, PolicyContext, PolicyReply } from '../../../shared/ports/policy.ts';
import type { GenerateResult, GenerateRow, SamplingOptions } from '../../engine/engine.ts';
import type { ChatTokenizer } from '../../engine/model/chat-tokenizer.ts';

export interface SampledTurn {
  promptIds: number[];
  completionIds: number[];
}

export class SampledTurnsPolicy implements Policy {
  readonly turns: SampledTurn[] = [];

  constructor(
    /** One row at a time: a RowCoalescer (trainer/fanout/row-coalescer.ts) batches concurrent rollouts. */
    private readonly engine: { contextLength: number; generate(row: GenerateRow): Promise<GenerateResult> },
    private readonly tokenizer: ChatTokenizer,
    private readonly o: { sampling: Omit<SamplingOptions, 'seed'>; seed: number; maxNewTokens: number },
  ) {}

  async act(messages: ChatMessage[], context: PolicyContext): Promise<PolicyReply> {
    const started = performance.now();
    let promptIds = this.tokenizer.encodeChat(messages);
    const budget = this.engine.contextLength - this.o.maxNewTokens;
    if (promptIds.length > budget) promptIds = promptIds.slice(promptIds.length - budget);
    const r = await this.engine.generate(
      {
        promptIds,
        member: { kind: 'base' },
        // One stream per (episode seed, turn): rollouts of a group differ only by their seed.
        sampling: { ...this.o.sampling, seed: (this.o.seed * 1009 + context.step) >>> 0 },
        maxNewTokens: this.o.maxNewTokens,
        stop: [],
        ...(context.constraint ? { constraint: context.constraint } : {}),
        signal: context.signal,
      },
    );
    this.turns.push({ promptIds, completionIds: r.tokenIds });
    return { text: r.text, tokens: { prompt: r.promptTokens, completion: r.completionTokens, cached: r.cachedTokens }, inferenceMs: performance.now() - started };
  }
}
