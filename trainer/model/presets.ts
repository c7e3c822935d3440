/**
 * Built model presets: Llama-style decoders (RMSNorm, rotary positions, SwiGLU MLP, untied LM head) over
 * the byte-level tokenizer's vocabulary. `tiny` keeps ONNX tests fast; `small` is the benchmark size.
 */
import type { ModelConfig } from './config.ts';
import { BYTE_VOCAB } from './byte-tokenizer.ts';

export type PresetName = 'tiny' | 'small';

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
};
