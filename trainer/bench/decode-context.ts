/**
 * The decode loop's context for a loaded model's graph, as the engine builds it (padded vocabulary rows
 * past the tokenizer never sampled), for benchmarks that drive sessions directly.
 */
import { headDim, kvHeads } from '../model/config.ts';
import type { LoadedModel } from '../model/model-dir.ts';

export function decodeContext(model: LoadedModel) {
  const c = model.config;
  const hasPositionIds = model.graph.graph.input.some((i) => i.name === 'position_ids');
  return {
    shape: { layers: c.num_hidden_layers, kvHeads: kvHeads(c), headDim: headDim(c), vocabSize: c.vocab_size, sampleable: Math.min(c.vocab_size, model.tokenizer.tokenCount), hasPositionIds },
    tokenizer: model.tokenizer,
    eosIds: new Set<number>(),
    padId: c.pad_token_id ?? 0,
  };
}
