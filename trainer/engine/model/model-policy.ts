/**
 * The Policy port on top of an Engine: an environment can be played by the model in-process, with the same
 * member selection, sampling seeds and token counts as the HTTP path.
 */
import type { ChatMessage, Policy, PolicyContext, PolicyReply } from '../../../shared/ports/policy.ts';
import type { Engine, MemberSelector, SamplingOptions } from '../engine.ts';
import { samplingSeed } from '../generation/sampling-seed.ts';

export interface ModelPolicyOptions {
  member: MemberSelector;
  /** Episode number: with the member and the turn it seeds sampling. */
  episode: number;
  sampling: Omit<SamplingOptions, 'seed'>;
  maxNewTokens: number;
  stop?: string[];
  allowedTokenIds?: number[];
}

export class ModelPolicy implements Policy {
  constructor(
    private readonly engine: Engine,
    private readonly options: ModelPolicyOptions,
  ) {}

  async act(messages: ChatMessage[], context: PolicyContext): Promise<PolicyReply> {
    // esopt's own decoders read text only: a screenshot observation needs an agent endpoint that sees images.
    if (messages.some((m) => m.images?.length)) throw new Error('the chat shows screenshots, which esopt\'s own models cannot see: use observation "text" or "axtree", or an agent endpoint that reads images');
    const o = this.options;
    const started = performance.now();
    const [r] = await this.engine.generate([
      {
        messages,
        member: o.member,
        sampling: { ...o.sampling, seed: samplingSeed(o.member, o.episode, context.step) },
        maxNewTokens: o.maxNewTokens,
        stop: o.stop ?? [],
        allowedTokenIds: o.allowedTokenIds,
        ...(context.constraint ? { constraint: context.constraint } : {}),
        signal: context.signal,
      },
    ]);
    return { text: r.text, tokens: { prompt: r.promptTokens, completion: r.completionTokens, cached: r.cachedTokens }, inferenceMs: performance.now() - started };
  }
}
