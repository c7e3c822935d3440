/**
 * The Policy an in-process episode plays: the request's member (or base) on the run's own engine, with
 * the sampling seed, token budget and action constraint the HTTP path would send (HttpPolicy →
 * trainer/serving/app.ts), so an episode plays the same moves either way.
 */
import type { ChatMessage, Policy, PolicyContext, PolicyReply } from '../../shared/ports/policy.ts';
import type { EpisodeRequest } from '../../shared/schemas/index.ts';
import { deriveSeed } from '../../environments/random.ts';
import type { MemberSelector } from '../engine/engine.ts';
import type { RowCoalescer } from './row-coalescer.ts';

export class EnginePolicy implements Policy {
  private readonly member: MemberSelector;

  constructor(
    private readonly engine: RowCoalescer,
    private readonly request: EpisodeRequest,
  ) {
    this.member = request.member === 'base' ? { kind: 'base' } : { kind: 'member', iteration: request.iteration, index: request.member };
  }

  async act(messages: ChatMessage[], context: PolicyContext): Promise<PolicyReply> {
    // esopt's own decoders read text only: a screenshot observation needs an agent endpoint that sees images.
    if (messages.some((m) => m.images?.length)) throw new Error('the chat shows screenshots, which esopt\'s own models cannot see: use observation "text" or "axtree", or an agent endpoint that reads images');
    if (context.tools?.length) {
      throw new Error(`${this.request.environment.name} offers chat tools, which in-process episodes do not serve: set localEpisodes to "worker-processes"`);
    }
    const started = performance.now();
    const g = this.request.generation;
    const r = await this.engine.generate({
      messages,
      member: this.member,
      sampling: { temperature: g.temperature, topP: g.topP, topK: g.topK, seed: deriveSeed(this.request.seed, context.step) },
      maxNewTokens: g.maxTokens,
      stop: [],
      ...(context.constraint && (this.request.policy.guidedDecoding ?? true) ? { constraint: context.constraint } : {}),
      ...(context.signal ? { signal: context.signal } : {}),
    });
    return { text: r.text, tokens: { prompt: r.promptTokens, completion: r.completionTokens, cached: r.cachedTokens }, inferenceMs: performance.now() - started };
  }
}
