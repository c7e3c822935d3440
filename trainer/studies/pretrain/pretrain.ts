/**
 * Pretraining of the demo's base agent: supervised imitation of the environment's scripted oracle with the
 * hand-written decoder gradient and Adam, from the preset's seeded initialisation. Deterministic in its
 * config (seeded init, seeded data order, fixed-order float64 accumulation), so `esopt pretrain` re-creates
 * the committed base model. The result is an ordinary export directory (trainer/engine/model/model-dir.ts).
 */
import { z } from 'zod';
import { EnvironmentSpec, Seed } from '../../../shared/schemas/index.ts';
import { loadEnvironment } from '../../../environments/index.ts';
import { SeededRandom } from '../../../environments/random.ts';
import { buildDecoder } from '../../engine/model/build-decoder.ts';
import { byteTokenizerConfig, byteTokenizerJson, BYTE_VOCAB } from '../../engine/model/byte-tokenizer.ts';
import { ChatTokenizer } from '../../engine/model/chat-tokenizer.ts';
import type { ModelConfig } from '../../engine/model/config.ts';
import { loadModelDir, saveModelDir } from '../../engine/model/model-dir.ts';
import { PRESETS } from '../../engine/model/presets.ts';
import { initDecoderWeights } from '../../engine/model/weights.ts';
import type { NamedTensor } from '../../engine/onnx/named-tensor.ts';
import { DecoderGradient, type LossSequence } from './decoder-gradient.ts';
import { imitationSequences } from './imitation-data.ts';

export const PretrainConfig = z
  .object({
    environment: EnvironmentSpec,
    /** Train-split oracle episodes that make the data set. */
    tasks: z.object({ count: z.number().int().min(1).max(1_000_000), seed: Seed.default(0) }),
    model: z.object({
      preset: z.enum(['tiny', 'small']),
      seed: Seed.default(0),
      /** The exported model's context window; the served prompt is cut from the left to fit it. */
      contextLength: z.number().int().min(16).max(8192),
      /** Narrower than the preset: fewer parameters make pretraining on a CPU and ES both cheaper. */
      hiddenSize: z.number().int().min(2).optional(),
      intermediateSize: z.number().int().min(1).optional(),
      layers: z.number().int().min(1).optional(),
      heads: z.number().int().min(1).optional(),
      /**
       * Continue from an export directory this command wrote (an earlier stage's config) instead of the
       * seeded initialisation; its shape must match. Re-running the stages in order reproduces the weights.
       */
      init: z.string().min(1).optional(),
    }),
    /** The completion budget the ES run will serve with (the prompt keeps contextLength − maxTokens). */
    maxTokens: z.number().int().min(1),
    /** Loss weight of the prompt's own next-token predictions (0 = reply tokens only); see imitation-data.ts. */
    promptWeight: z.number().min(0).finite().default(0),
    steps: z.number().int().min(1).max(1_000_000),
    batch: z.number().int().min(1).max(4096),
    learningRate: z.number().positive().finite(),
    warmupSteps: z.number().int().min(0).default(0),
    /** Global gradient-norm clip; 0 disables. */
    clipNorm: z.number().min(0).finite().default(1),
    seed: Seed.default(0),
  })
  .strict();
export type PretrainConfig = z.infer<typeof PretrainConfig>;

export interface PretrainStep {
  step: number;
  /** Weighted mean cross-entropy per scored token over the step's batch (nats). */
  loss: number;
  /** Weighted share of scored tokens the argmax predicted. */
  accuracy: number;
}

export interface PretrainResult {
  config: ModelConfig;
  weights: NamedTensor[];
  sequences: number;
  history: PretrainStep[];
}

const BETA1 = 0.9;
const BETA2 = 0.999;
const EPSILON = 1e-8;

export function modelConfigFor(c: PretrainConfig): ModelConfig {
  const base = PRESETS[c.model.preset];
  const heads = c.model.heads ?? base.num_attention_heads;
  return {
    ...base,
    hidden_size: c.model.hiddenSize ?? base.hidden_size,
    intermediate_size: c.model.intermediateSize ?? base.intermediate_size,
    num_hidden_layers: c.model.layers ?? base.num_hidden_layers,
    num_attention_heads: heads,
    num_key_value_heads: heads,
    max_position_embeddings: c.model.contextLength,
  };
}

/** Called after every step with the live weights (for progress and snapshots). */
export type OnPretrainStep = (s: PretrainStep, total: number, live: Pick<PretrainResult, 'config' | 'weights'>) => void;

function initialWeightsFrom(dir: string, config: ModelConfig): NamedTensor[] {
  const loaded = loadModelDir(dir);
  const expected = initDecoderWeights(config, 0);
  if (JSON.stringify(loaded.weights.map((w) => [w.name, w.dims])) !== JSON.stringify(expected.map((w) => [w.name, w.dims]))) {
    throw new Error(`model.init: ${dir} does not have the tensors of the configured model (name and shape must match)`);
  }
  return loaded.weights.map((w) => ({ name: w.name, dims: w.dims, data: w.data.slice() }));
}

export async function pretrain(c: PretrainConfig, onStep?: OnPretrainStep): Promise<PretrainResult> {
  const config = modelConfigFor(c);
  const tokenizer = new ChatTokenizer(byteTokenizerJson(), byteTokenizerConfig());
  const definition = await loadEnvironment(c.environment.name);
  const data = await imitationSequences({
    definition,
    options: c.environment.options,
    taskCount: c.tasks.count,
    taskSeed: c.tasks.seed,
    tokenizer,
    contextLength: config.max_position_embeddings,
    maxTokens: c.maxTokens,
    endOfTurnId: BYTE_VOCAB.imEnd,
    promptWeight: c.promptWeight,
  });
  const weights = c.model.init ? initialWeightsFrom(c.model.init, config) : initDecoderWeights(config, c.model.seed);
  const model = new DecoderGradient(config, weights);
  const m = model.zeroGradients();
  const v = model.zeroGradients();
  const random = new SeededRandom(c.seed, 0x9e7a);
  let order: number[] = [];
  const next = (): LossSequence => {
    if (order.length === 0) order = random.shuffle(Array.from({ length: data.length }, (_, i) => i));
    return data[order.pop()!];
  };
  const history: PretrainStep[] = [];
  for (let step = 1; step <= c.steps; step++) {
    const grads = model.zeroGradients();
    let loss = 0;
    let correct = 0;
    let scored = 0;
    for (let b = 0; b < c.batch; b++) {
      const seq = next();
      const r = model.accumulate(seq, grads);
      loss += r.loss;
      correct += r.correct;
      scored += seq.weights ? seq.weights.reduce((a, w) => a + w, 0) : seq.targets.length;
    }
    // Mean over scored tokens, then the global-norm clip.
    let norm = 0;
    for (const g of grads) for (let i = 0; i < g.length; i++) norm += (g[i] /= scored) ** 2;
    norm = Math.sqrt(norm);
    const clip = c.clipNorm > 0 && norm > c.clipNorm ? c.clipNorm / norm : 1;
    const lr = c.learningRate * (c.warmupSteps > 0 ? Math.min(1, step / c.warmupSteps) : 1);
    const c1 = 1 - BETA1 ** step;
    const c2 = 1 - BETA2 ** step;
    weights.forEach((t, k) => {
      const g = grads[k];
      const mk = m[k];
      const vk = v[k];
      for (let i = 0; i < g.length; i++) {
        const gi = g[i] * clip;
        mk[i] = BETA1 * mk[i] + (1 - BETA1) * gi;
        vk[i] = BETA2 * vk[i] + (1 - BETA2) * gi * gi;
        t.data[i] -= (lr * (mk[i] / c1)) / (Math.sqrt(vk[i] / c2) + EPSILON);
      }
    });
    const s = { step, loss: loss / scored, accuracy: correct / scored };
    history.push(s);
    onStep?.(s, c.steps, { config, weights });
    // Let timers run (the progress bar redraws on one).
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  return { config, weights, sequences: data.length, history };
}

/** Writes the pretrained weights as an export directory the trainer loads with `model: { dir }`. */
export function savePretrained(dir: string, r: Pick<PretrainResult, 'config' | 'weights'>): void {
  saveModelDir(dir, { config: r.config, graph: buildDecoder(r.config, r.weights), tokenizerJson: byteTokenizerJson(), tokenizerConfig: byteTokenizerConfig() });
}
