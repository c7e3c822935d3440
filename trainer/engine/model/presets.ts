/**
 * Built model presets over the byte-level tokenizer: Llama-style decoders (RMSNorm, rotary positions,
 * SwiGLU MLP, untied LM head) `tiny` (ONNX tests) and `small` (the benchmark size), and
 * `qwen3-0.6b-shape`, Qwen3-0.6B's shape with random weights: 28 layers, hidden 1,024, 16 query / 8 KV
 * heads of 128, q/k norms, MLP 3,072, tied head, vocabulary 151,936 of which the 260 byte tokens are
 * sampled (the rest are padding rows, as Qwen3's rows past its tokenizer are).
 */
import type { LocalModelSpec } from '../../../shared/schemas/index.ts';
import type { ModelConfig } from './config.ts';
import { BYTE_VOCAB } from './byte-tokenizer.ts';

export type PresetName = 'tiny' | 'small' | 'qwen3-0.6b-shape';

const common = {
  model_type: 'llama',
  vocab_size: BYTE_VOCAB.size,
  rope_theta: 10000,
  rms_norm_eps: 1e-5,
  tie_word_embeddings: false,
  bos_token_id: BYTE_VOCAB.bos,
  eos_token_id: [BYTE_VOCAB.imEnd, BYTE_VOCAB.endOfText],
  pad_token_id: BYTE_VOCAB.pad,
  torch_dtype: 'float32',
};

export const PRESETS: Record<PresetName, ModelConfig> = {
  // ≈0.14 M parameters
  tiny: { ...common, hidden_size: 64, intermediate_size: 192, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 4, max_position_embeddings: 512 },
  // ≈10.8 M parameters
  small: { ...common, hidden_size: 384, intermediate_size: 1024, num_hidden_layers: 6, num_attention_heads: 6, num_key_value_heads: 6, max_position_embeddings: 2048 },
  // 596,049,920 parameters (2.38 GB in fp32): Qwen3-0.6B's config.json fields, rope and eps included
  'qwen3-0.6b-shape': {
    ...common,
    model_type: 'qwen3',
    vocab_size: 151_936,
    hidden_size: 1024,
    intermediate_size: 3072,
    num_hidden_layers: 28,
    num_attention_heads: 16,
    num_key_value_heads: 8,
    head_dim: 128,
    max_position_embeddings: 40_960,
    rope_theta: 1_000_000,
    rms_norm_eps: 1e-6,
    tie_word_embeddings: true,
  },
};

/**
 * Presets whose θ passes 1 GiB: built once into a cache directory, streamed to disk a tensor at a time,
 * and loaded from there like an export (preset-dir.ts), instead of built in memory on every open.
 */
export const CACHED_PRESETS: ReadonlySet<PresetName> = new Set(['qwen3-0.6b-shape']);

/** `--model NAME|DIR` as a model spec: a preset's name is that preset (seeded with `seed`), anything else an export directory. */
export function modelSpecFlag(value: string, seed: number): LocalModelSpec {
  return value in PRESETS ? ({ preset: value, seed } as LocalModelSpec) : { dir: value };
}
