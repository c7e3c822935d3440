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
    /** Mistral: attention sees the last `sliding_window` positions (Qwen2 only with use_sliding_window). */
    sliding_window: z.number().int().min(1).nullable().optional(),
    use_sliding_window: z.boolean().optional(),
    /** Llama: biases on q/k/v/o (Qwen2 always has q/k/v biases and no field). */
    attention_bias: z.boolean().optional(),
    /** Gemma: the MLP's activation (`gelu_pytorch_tanh`); Llama/Qwen/Mistral use SiLU (`hidden_act: silu`). */
    hidden_activation: z.string().optional(),
    hidden_act: z.string().optional(),
    rope_scaling: z
      .object({
        rope_type: z.string().optional(),
        type: z.string().optional(),
        factor: z.number().positive().optional(),
        low_freq_factor: z.number().positive().optional(),
        high_freq_factor: z.number().positive().optional(),
        original_max_position_embeddings: z.number().int().min(1).optional(),
      })
      .loose()
      .nullable()
      .optional(),
  })
  .loose();
export type ModelConfig = z.infer<typeof ModelConfig>;

export function headDim(c: ModelConfig): number {
  return c.head_dim ?? c.hidden_size / c.num_attention_heads;
}

export function kvHeads(c: ModelConfig): number {
  return c.num_key_value_heads ?? c.num_attention_heads;
}

/**
 * The context esopt serves: max_position_embeddings, or a smaller sliding window. Within the window a
 * sliding-window model attends to every position, so whether or not an export's graph implements the
 * window, it computes the same thing; longer contexts are refused (or left-truncated) like any other.
 */
export function contextLength(c: ModelConfig): { length: number; why: string } {
  const window = c.use_sliding_window === false ? null : c.sliding_window;
  return window && window < c.max_position_embeddings
    ? { length: window, why: `config.json's sliding_window (max_position_embeddings is ${c.max_position_embeddings}; esopt serves contexts the window covers whole)` }
    : { length: c.max_position_embeddings, why: "config.json's max_position_embeddings" };
}

export function eosTokenIds(c: ModelConfig): number[] {
  const e = c.eos_token_id;
  return e === undefined || e === null ? [] : Array.isArray(e) ? e : [e];
}

/**
 * What the builder and the reference forward vary by family. The loader needs none of it (an export's graph
 * carries its architecture); it reads only the IO shapes: layers, kv heads, head_dim, vocab, eos.
 */
export interface Architecture {
  /** Qwen2 (always) and Llama with attention_bias: q/k/v carry biases (Llama's o_proj too). */
  qkvBias: boolean;
  oBias: boolean;
  /** Qwen3: RMSNorm over each head of q and k before the rotary positions. */
  qkNorm: boolean;
  /** Gemma: embeddings × √hidden, RMSNorm scales by (1 + w), gelu (tanh) MLP. */
  gemma: boolean;
  tied: boolean;
}

export function architecture(c: ModelConfig): Architecture {
  const type = c.model_type.toLowerCase();
  const gemma = type === 'gemma';
  return {
    qkvBias: type === 'qwen2' || c.attention_bias === true,
    oBias: type !== 'qwen2' && c.attention_bias === true,
    qkNorm: type === 'qwen3',
    gemma,
    tied: c.tie_word_embeddings ?? gemma,
  };
}

/** Rotary inverse frequencies [head_dim/2]: θ^(−2i/d), with Llama 3's rope_scaling when the config has it. */
export function rotaryInverseFrequencies(c: ModelConfig): Float64Array {
  const hd = headDim(c);
  const base = c.rope_theta ?? 10000;
  const inv = Float64Array.from({ length: hd / 2 }, (_, i) => 1 / base ** ((2 * i) / hd));
  const s = c.rope_scaling;
  const type = s?.rope_type ?? s?.type;
  if (!s || type === undefined || type === 'default') return inv;
  if (type !== 'llama3') throw new Error(`config.json: rope_scaling.rope_type "${type}" is not supported (default and llama3 are)`);
  const factor = s.factor ?? 8;
  const low = s.low_freq_factor ?? 1;
  const high = s.high_freq_factor ?? 4;
  const old = s.original_max_position_embeddings ?? 8192;
  const lowWavelen = old / low;
  const highWavelen = old / high;
  // transformers' _compute_llama3_parameters: long wavelengths slowed by `factor`, short ones kept, a blend between
  return inv.map((f) => {
    const wavelen = (2 * Math.PI) / f;
    if (wavelen < highWavelen) return f;
    if (wavelen > lowWavelen) return f / factor;
    const smooth = (old / wavelen - low) / (high - low);
    return (1 - smooth) * (f / factor) + smooth * f;
  });
}
