/**
 * The model's config.json, in the Hugging Face field names (a Llama-style decoder), validated with zod so a
 * broken config names its field. Built models write exactly this; loaded exports must provide at least it.
 */
import { z } from 'zod';

const TokenIds = z.union([z.number().int().min(0), z.array(z.number().int().min(0)).min(1)]);

export const ModelConfig = z
  .object({
    model_type: z.string().min(1),
    vocab_size: z.number().int().min(1),
    hidden_size: z.number().int().min(1),
    intermediate_size: z.number().int().min(1).optional(),
    num_hidden_layers: z.number().int().min(1),
    num_attention_heads: z.number().int().min(1),
    num_key_value_heads: z.number().int().min(1).optional(),
    head_dim: z.number().int().min(1).optional(),
    max_position_embeddings: z.number().int().min(1),
    rope_theta: z.number().positive().optional(),
    rms_norm_eps: z.number().positive().optional(),
    tie_word_embeddings: z.boolean().optional(),
    bos_token_id: TokenIds.nullable().optional(),
    eos_token_id: TokenIds.nullable().optional(),
    pad_token_id: z.number().int().min(0).nullable().optional(),
    torch_dtype: z.string().optional(),
  })
  .loose();
export type ModelConfig = z.infer<typeof ModelConfig>;

export function headDim(c: ModelConfig): number {
  return c.head_dim ?? c.hidden_size / c.num_attention_heads;
}

export function kvHeads(c: ModelConfig): number {
  return c.num_key_value_heads ?? c.num_attention_heads;
}

export function eosTokenIds(c: ModelConfig): number[] {
  const e = c.eos_token_id;
  return e === undefined || e === null ? [] : Array.isArray(e) ? e : [e];
}
