/**
 * The model runtime's face to the rest of the trainer: one Engine holds the only copy of θ and serves the
 * base model and any member of the current population from it. The inference server, the ES loop and the
 * in-process Policy adapter all code against this interface; trainer/engine/model/create-engine.ts builds one.
 */
import type { Coefficient, ParameterSegment } from '../../shared/es.ts';
import type { ActionConstraint, ChatMessage, ToolSpec } from '../../shared/ports/policy.ts';
import type { FullModeWeights, LocalModelSpec, Member } from '../../shared/schemas/index.ts';
import type { ExecutionProvider } from '../../shared/execution-provider.ts';
import type { Targets } from '../../shared/targets.ts';
import type { DeviceNoiseName, NoiseDefinitionName } from '../../shared/noise-definition.ts';
import type { LoraOptions } from '../../shared/lora.ts';

/**
 * How a model family writes tool calls, read off its chat template (trainer/engine/model/tool-format.ts): Qwen /
 * Hermes `<tool_call>…</tool_call>`, or Llama 3.x's one bare JSON object.
 */
export type ToolFormat = 'hermes' | 'llama3-json';

/** Which weights a row runs on: θ itself, or member `index` of the population of `iteration`. */
export type MemberSelector = { kind: 'base' } | { kind: 'member'; iteration: number; index: number };

export interface SamplingOptions {
  /** 0 = greedy. */
  temperature: number;
  /** Nucleus mass in (0, 1]; 1 disables. */
  topP: number;
  /** 0 disables. */
  topK: number;
  /**
   * Seeds this row's sampling; the token at decode step t is drawn from a stream keyed by (seed, t), so a
   * row's output depends only on its prompt, weights and seed, never on what else shares its batch.
   * Use `samplingSeed(member, episode, turn)` from trainer/engine/generation/sampling-seed.ts for episodes.
   */
  seed: number;
}

export interface GenerateRow {
  /** Chat messages (rendered with the model's chat template and generation prompt) or raw prompt ids. */
  messages?: ChatMessage[];
  /** Tools rendered with `messages` through the chat template (trainer/engine/model/chat-tools.ts). */
  tools?: ToolSpec[];
  promptIds?: number[];
  member: MemberSelector;
  sampling: SamplingOptions;
  maxNewTokens: number;
  /** Generation ends when the decoded completion contains one of these; the text is cut before it. */
  stop: string[];
  /** Only these token ids may be generated (the end-of-sequence token is always allowed). */
  allowedTokenIds?: number[];
  /**
   * The completion must match this as a whole: only tokens that keep it a prefix of a match are decoded,
   * end-of-sequence only after a whole match, and the row ends by itself once the match cannot grow.
   * Throws ConstraintError (trainer/engine/generation/regex-automaton.ts) if the pattern does not compile.
   */
  constraint?: ActionConstraint;
  /** Keep generating past end-of-sequence tokens (benchmarks that need a fixed token count). */
  ignoreEos?: boolean;
  signal?: AbortSignal;
  /**
   * Streaming: called during decoding with each new piece of the completion, as soon as it can no longer
   * change — never half a multi-byte character, never text that a stop string will cut — and with the rest
   * when the row finishes, so the pieces concatenate to the result's `text`. Runs inside the decode loop:
   * keep it cheap and do not throw (an exception fails the whole engine call).
   */
  onText?: (delta: string) => void;
}

export type FinishReason = 'stop' | 'length' | 'abort';

export interface GenerateResult {
  text: string;
  tokenIds: number[];
  promptTokens: number;
  /** Of the prompt tokens, how many had their keys and values served from the prefix cache (not prefilled). */
  cachedTokens: number;
  completionTokens: number;
  finishReason: FinishReason;
}

export interface Population {
  runSeed: number;
  iteration: number;
  sigma: number;
  /** Low-rank mode only; ignored in full and LoRA mode. */
  rank: number;
  /** The tensors the members perturb; absent: all of them. */
  targets?: Targets;
  /** The run's noise definition when not the default: full mode only (shared/noise-definition.ts). */
  noise?: DeviceNoiseName;
  members: Member[];
}

export type PerturbationMode = 'full' | 'lowrank' | 'lora';

export interface EngineUpdate {
  runSeed: number;
  iteration: number;
  /** From shared/es.ts `tell`. */
  coefficients: Coefficient[];
  /** Low-rank only: the rank the population was drawn with. */
  rank: number;
  decay?: number;
  /** The tensors the update touches (decay included); absent: all of them. */
  targets?: Targets;
  /** The noise definition of the update's ε when not the default: full mode only. */
  noise?: DeviceNoiseName;
}

export interface Engine {
  readonly mode: PerturbationMode;
  /** Context window in tokens (prompt + completion). */
  readonly contextLength: number;
  /** The members `generate` may serve; null = base only. Rows naming another member are rejected. */
  setPopulation(p: Population | null): void;
  /**
   * Rows may mix members. Full mode groups them by member (perturb θ in place, run, restore exactly);
   * low-rank mode runs them all in one forward pass with per-row factors. Calls are serialised internally.
   */
  generate(rows: GenerateRow[]): Promise<GenerateResult[]>;
  /**
   * The perturbable θ as views onto the live weights: the ES update writes into them. In full mode θ is
   * perturbed in place while a member's rows run, so hash, checkpoint or edit it through
   * `withRestoredWeights` (or when no generate call is pending).
   */
  segments(): ParameterSegment[];
  /**
   * The names of the tensors `targets` selects among those this engine's mode perturbs (full mode: all of
   * θ; low-rank mode: its matrices), in θ's order. Throws, naming the patterns and a few tensors, when a
   * pattern matches none or nothing is left: the loop calls it at run start.
   */
  targetTensors(targets: Targets): string[];
  /** Run `fn` on θ while no generation is in flight (θ unperturbed), serialised with generate/update. */
  withRestoredWeights<T>(fn: (segments: ParameterSegment[]) => T | Promise<T>): Promise<T>;
  /** After θ changed in place: refresh whatever depends on it (sessions, caches) without reloading. */
  commitUpdate(): Promise<void>;
  /**
   * The ES update of one iteration in this engine's mode, then commitUpdate: full mode applies
   * θ ← (1−decay)·θ + Σ coef_j·ε_j over all segments (shared applyDenseUpdate); low-rank mode folds
   * Σ coef_j·A_j B_jᵀ/√r into each perturbed matrix (shared accumulateLowRank) with the population's rank.
   */
  applyUpdate(update: EngineUpdate): Promise<void>;
  /** The prompt ids a row with these messages (and tools) would decode from, before any truncation. */
  encodeChat(messages: ChatMessage[], tools?: ToolSpec[]): number[];
  /** How the model writes tool calls, read off its chat template (trainer/engine/model/tool-format.ts). */
  readonly toolFormat: ToolFormat;
  close(): Promise<void>;
}


/** How `createEngine` (trainer/engine/model/create-engine.ts) builds an engine. */
export interface EngineOptions {
  /** A built preset (`{ preset, seed }`) or an export directory (`{ dir }`); a named model resolved to its directory first. */
  model: LocalModelSpec;
  mode: PerturbationMode;
  executionProvider?: ExecutionProvider;
  /** Prompt longer than the context: 'error' (default) rejects the row, 'truncate-left' drops the oldest tokens. */
  contextPolicy?: 'error' | 'truncate-left';
  /** Rows per forward pass; larger requests are split. Default 32. */
  maxBatch?: number;
  /** onnxruntime intra-op threads; default: let onnxruntime decide. */
  threads?: number;
  /**
   * Full mode only. 'inputs' (default): θ is fed as graph inputs, so switching members costs only the
   * in-place perturb/restore, but onnxruntime cannot prepack the weights. 'rebuild-session': θ stays as
   * initializers (prepacked, full speed) and a session is built per member after perturbing, which pays a
   * session build per member switch (from the ORT-format model θ then lives in, below 2 GiB of θ with one
   * switch thread; by encoding the graph otherwise) and holds a prepacked copy of θ beside it. See docs/MODEL.md.
   */
  fullModeWeights?: FullModeWeights;
  /**
   * LoRA mode only (required there): the adapters' rank, alpha and matrices, and the run seed their θ₀ is
   * drawn from (PEFT's init: A Kaiming-uniform, B zero).
   */
  lora?: LoraOptions & { seed: number };
  /**
   * Full mode only: threads that perturb, restore and switch θ, this one included (θ's tensors are lent to
   * worker threads, trainer/engine/perturbation/perturbation-pool.ts). Default: every core for θ of 2^29
   * elements (2 GiB) or more, where each worker's own memory is a small share of the process; 1 below.
   */
  switchThreads?: number;
  /**
   * Bytes of the prefix KV cache (trainer/engine/generation/prefix-cache.ts): a row's prompt reuses the keys and
   * values of an earlier decode on the same weights (θ version and member) that began with the same
   * tokens, so an episode's next turn prefills only what it appended. Least recently used entries go
   * first; 0 disables it. Default DEFAULT_PREFIX_CACHE_BYTES.
   */
  prefixCacheBytes?: number;
  /**
   * KV caches that grow in place (trainer/engine/model/fused-attention.ts): each layer's attention becomes
   * onnxruntime's GroupQueryAttention over buffers the decode loop owns, and a step returns only its own
   * keys and values instead of a copy of the whole past. Default true, or false where ESOPT_IN_PLACE_KV=0; it applies on the CPU provider
   * to graphs whose attention fused-attention.ts recognises by structure (the presets, PyTorch's TorchScript
   * exports of Llama / Qwen2 / Qwen3-style decoders), and any other graph decodes unfused, with a warning
   * that says why.
   */
  inPlaceKv?: boolean;
  /**
   * webgpu only: keep the KV caches on the device between decode steps (default true), so a step moves
   * only its token ids, positions and attention mask in and the last position's logits out; false copies
   * every cache to the host and back each step (the route before, kept to measure against).
   */
  kvOnDevice?: boolean;
  /**
   * The run's noise definition (RunConfig `noise`; absent: 'esopt-noise'). Full mode on webgpu with
   * 'esopt-device-noise' keeps θ on the device and makes each member's weights there
   * (engine/members/full-device.ts); its populations must then name that noise. Elsewhere it changes no route.
   */
  noise?: NoiseDefinitionName;
  /** The device route's most elements per noise-graph call (default 2^31 − 1); smaller cuts θ's tensors into more pieces. */
  devicePieceElements?: number;
  /**
   * The device route's most elements one noise-graph run makes (default 2^24; at most 2^31 − 1): consecutive
   * targeted pieces are made together up to it, bounding the run's temporary tensors; 1 makes a run per piece.
   */
  deviceGroupElements?: number;
  /** Called after every decode step with the bytes of host tensors it fed and fetched (`esopt bench transfer`). */
  onDecodeStep?: (t: StepTransfer) => void;
  /**
   * onnxruntime session profiling into this directory, one file per session, written when the session is
   * released (engine close): `esopt bench transfer` reads the Memcpy nodes' bytes from them
   * (onnx/session-profile.ts). Absent: not profiled.
   */
  profileDir?: string;
}

/**
 * Host ↔ device bytes of one decode step, from the tensors the host fed and fetched (a tensor left on the
 * device counts nothing); copies onnxruntime makes inside a session for nodes its provider has no kernel for
 * are not seen.
 */
export interface StepTransfer {
  rows: number;
  /** Host tensors fed, by input name (θ as inputs, factors, ids, mask, caches on the host route). */
  hostToDevice: Record<string, number>;
  /** Host tensors fetched, by output name. */
  deviceToHost: Record<string, number>;
}

/** The prefix cache's default budget (1 GiB); `prefixCacheBytes` sets another, 0 none. */
export const DEFAULT_PREFIX_CACHE_BYTES = 1024 ** 3;
