/**
 * OnnxEngine, the Engine on onnxruntime-node: one LoadedModel holds θ, and a MemberWeights strategy
 * (engine/members/) decides how a member's weights are put in place from it. The engine itself prepares rows (chat template,
 * context policy, allowed tokens, constraints), resolves members against the live population, runs every
 * call one at a time, and decodes batches, each row's prompt starting from the longest prefix the prefix
 * cache holds for its owner: the θ version (bumped by every update, refresh or edit of θ) and the member
 * (with the population version, bumped by every setPopulation), so K/V never cross weights. One file past
 * 300 lines because its parts share one object's state: the queue that keeps calls one at a time, the
 * θ and population versions that own the cached K/V, the model's shape and context length; each part stays
 * beside the state it reads.
 *
 * The engine room's layers, each importing only from those below it (docs/architecture.json states them,
 * test/architecture.test.ts holds the code to them, docs/ARCHITECTURE.md shows them):
 *   model/create-engine.ts             the factory: picks a strategy, rewrites the graph, makes sessions
 *   model/onnx-engine.ts               this class
 *   members/                           one MemberWeights strategy a file
 *   model/sessions.ts, ort-format.ts   onnxruntime sessions
 *   model/ (the rest)                  the model: export directories, built decoders, tokenizers, θ's tensors
 *   perturbation/, generation/         θ's perturbations and graph rewrites; decoding and sampling
 *   onnx/                              ONNX protobuf, graph builder, external data
 *   engine.ts                          the Engine interface and its types
 *   shared/                            noise, ES maths, schemas, ports
 */
import type * as ort from 'onnxruntime-node';
import type { ParameterSegment } from '../../../shared/es.ts';
import type { ActionConstraint, ChatMessage, ToolSpec } from '../../../shared/ports/policy.ts';
import type { Member } from '../../../shared/schemas/index.ts';
import { DEFAULT_PREFIX_CACHE_BYTES, type Engine, type EngineOptions, type EngineUpdate, type GenerateResult, type GenerateRow, type MemberSelector, type PerturbationMode, type Population } from '../engine.ts';
import { decodeBatch, type DecodeContext, type DecoderShape, type PreparedRow } from '../generation/decode-loop.ts';
import type { Crossings } from '../generation/crossings.ts';
import { DeviceTensors } from '../generation/device-tensors.ts';
import { PrefixCache, type KvBlock } from '../generation/prefix-cache.ts';
import { compileConstraint } from '../generation/regex-automaton.ts';
import { TokenConstraint, vocabularyTexts } from '../generation/token-constraint.ts';
import { DataType } from '../onnx/proto.ts';
import { contextLength, eosTokenIds, headDim, kvHeads } from './config.ts';
import type { LoadedModel } from './model-dir.ts';
import { keepsKvOnDevice } from './sessions.ts';
import type { MemberWeights } from '../members/member-weights.ts';
import { FullDeviceMembers, type SwitchTransfer } from '../members/full-device.ts';
import type { TargetTensors } from './target-tensors.ts';
import type { Targets } from '../../../shared/targets.ts';

export class ContextLengthError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ContextLengthError';
  }
}

/** How the engine's graph keeps its KV caches between decode steps (create-engine.ts decides). */
export type KvCacheForm = { inPlace: true } | { inPlace: false; reason: string };

export class OnnxEngine implements Engine {
  private population: Population | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private readonly shape: DecoderShape;
  private readonly eosIds: Set<number>;
  private readonly padId: number;
  /** The vocabulary's token texts, built on the first constrained row. */
  private tokenTexts: Array<string | null> | null = null;
  /** Compiled constraints by automaton, so their per-state masks survive across requests. */
  private readonly constraints = new WeakMap<object, TokenConstraint>();
  readonly contextLength: number;
  /** Where contextLength comes from, for the error that cites it. */
  private readonly contextSource: string;
  /** Null when disabled (prefixCacheBytes 0). */
  private readonly prefixCache: PrefixCache | null;
  /** Bumped whenever θ may have changed: K/V cached before it are of other weights. */
  private thetaVersion = 0;
  /** Bumped by every setPopulation: a member index names other weights in another population. */
  private populationVersion = 0;
  /** The device ops on the caches, where the sessions keep them on a WebGPU device (made on the first decode). */
  private device: Promise<DeviceTensors> | null = null;
  private deviceMade: DeviceTensors | null = null;

  constructor(
    readonly mode: PerturbationMode,
    private readonly model: LoadedModel,
    /** θ as segments over the model's tensors (the strategy re-points their views during a switch). */
    private readonly segmentList: ParameterSegment[],
    private readonly members: MemberWeights,
    /** The tensors this mode perturbs, as run targets choose among them. */
    private readonly targets: TargetTensors,
    private readonly options: EngineOptions,
    hasPositionIds: boolean,
    /** Whether the caches grow in place (fused attention), or why not. */
    readonly kvCache: KvCacheForm = { inPlace: false, reason: 'not asked for' },
  ) {
    const c = model.config;
    this.shape = { layers: c.num_hidden_layers, kvHeads: kvHeads(c), headDim: headDim(c), vocabSize: c.vocab_size, sampleable: Math.min(c.vocab_size, model.tokenizer.tokenCount), hasPositionIds, kvType: kvTypeOf(model) };
    const eos = model.tokenizer.eosToken === undefined ? undefined : model.tokenizer.tokenId(model.tokenizer.eosToken);
    this.eosIds = new Set([...eosTokenIds(c), ...(eos === undefined ? [] : [eos])]);
    this.padId = c.pad_token_id ?? [...this.eosIds][0] ?? 0;
    this.contextLength = contextLength(c).length;
    this.contextSource = contextLength(c).why;
    const budget = options.prefixCacheBytes ?? DEFAULT_PREFIX_CACHE_BYTES;
    this.prefixCache = budget === 0 ? null : new PrefixCache(budget);
  }

  /** The model's tokenizer (chat template, encode/decode). */
  get tokenizer() {
    return this.model.tokenizer;
  }

  setPopulation(p: Population | null): void {
    this.refuseNoise(p?.noise);
    this.population = p;
    this.members.setPopulation(p);
    this.populationVersion++;
    this.prefixCache?.evictWhere((owner) => owner !== this.baseOwner());
  }

  /** What the prefix cache holds: bytes and entries. */
  get prefixCacheUsage(): { bytes: number; entries: number } {
    return { bytes: this.prefixCache?.bytes ?? 0, entries: this.prefixCache?.size ?? 0 };
  }

  segments(): ParameterSegment[] {
    return this.segmentList;
  }

  targetTensors(targets: Targets): string[] {
    return this.targets.names(targets);
  }

  /** `fn` may write θ: what was cached before is of other weights. */
  withRestoredWeights<T>(fn: (segments: ParameterSegment[]) => T | Promise<T>): Promise<T> {
    return this.exclusive(() => this.changingTheta(async () => fn(this.segmentList)));
  }

  encodeChat(messages: ChatMessage[], tools?: ToolSpec[]): number[] {
    return this.model.tokenizer.encodeChat(messages, tools);
  }

  get toolFormat() {
    return this.model.tokenizer.toolFormat;
  }

  /** Run `task` after everything queued before it: generation, updates and refreshes never overlap. */
  private exclusive<T>(task: () => Promise<T>): Promise<T> {
    const run = this.queue.then(task, task);
    this.queue = run.catch(() => undefined);
    return run;
  }

  async generate(rows: GenerateRow[]): Promise<GenerateResult[]> {
    const prepared = rows.map((r) => this.prepare(r));
    const members = rows.map((r) => this.resolveMember(r.member));
    return this.exclusive(async () => {
      const out = new Array<GenerateResult>(rows.length);
      // owners are named when the weights serve, after everything queued before this call changed them
      const owners = rows.map((r) => this.ownerOf(r.member));
      // a population set while this call decodes retires its owners: what they computed is not kept
      const current = (k: number) => owners[k] === this.ownerOf(rows[k].member);
      await this.members.generate(members, (session, indices, feeds, shared) => this.decode(session, indices, prepared, owners, current, out, feeds, shared));
      return out;
    });
  }

  commitUpdate(): Promise<void> {
    return this.exclusive(() => this.changingTheta(() => this.members.refresh()));
  }

  applyUpdate(u: EngineUpdate): Promise<void> {
    this.refuseNoise(u.noise);
    return this.exclusive(() => this.changingTheta(() => this.members.applyUpdate(u)));
  }

  /** Low-rank and LoRA members draw their factors from 'esopt-noise' only (RunConfig refuses the rest at `noise`). */
  private refuseNoise(noise: Population['noise']): void {
    if (noise && this.mode !== 'full') throw new Error(`noise "${noise}" is for full mode; this engine runs ${this.mode} mode`);
  }

  /** Whose K/V a row computes: θ's version, and for a member the population's version and the member. */
  private ownerOf(sel: MemberSelector): string {
    return sel.kind === 'base' ? this.baseOwner() : `θ${this.thetaVersion} population ${this.populationVersion} member ${sel.iteration}-${sel.index}`;
  }

  private baseOwner(): string {
    return `θ${this.thetaVersion} base`;
  }

  /** Runs `task`, which may change θ, then retires every cached K/V (also when it throws half-way). */
  private async changingTheta<T>(task: () => Promise<T>): Promise<T> {
    try {
      return await task();
    } finally {
      this.thetaVersion++;
      this.prefixCache?.clear();
    }
  }

  close(): Promise<void> {
    return this.exclusive(async () => {
      await this.members.close();
      await (await this.device)?.release();
    });
  }

  /** How members are served: 'device' (θ on the device, members made there: members/full-device.ts) or 'host'. */
  get memberRoute(): 'device' | 'host' {
    return this.members instanceof FullDeviceMembers ? 'device' : 'host';
  }

  /** The device route's strategy (its `withMember` times a switch alone: bench full); null on the host route. */
  get deviceMembers(): FullDeviceMembers | null {
    return this.members instanceof FullDeviceMembers ? this.members : null;
  }

  /** The device route's bytes outside decode steps (θ's uploads, member switches); null on the host route. */
  get switchTransfer(): SwitchTransfer | null {
    return this.members instanceof FullDeviceMembers ? this.members.transfer : null;
  }

  /**
   * Bytes the decode loop's device moves crossed (uploads of a batch's extra inputs, row indices of the
   * gathers, the caches downloaded for the prefix cache), counted at those session runs; null where the
   * caches are not kept on a device or no batch has run.
   */
  get deviceCrossings(): Crossings | null {
    return this.deviceMade ? { ...this.deviceMade.crossed } : null;
  }

  /** gpu-buffer tensors the device route holds (θ's pieces between calls); 0 on the host route. */
  get liveRouteTensors(): number {
    return this.members instanceof FullDeviceMembers ? this.members.liveTensors : 0;
  }

  /** gpu-buffer tensors the decode loop holds (0 between calls: every cache is disposed when its batch ends). */
  get liveDeviceTensors(): number {
    return this.deviceMade?.live ?? 0;
  }

  private resolveMember(sel: MemberSelector): Member | null {
    if (sel.kind === 'base') return null;
    const p = this.population;
    if (!p || p.iteration !== sel.iteration) throw new Error(`member-${sel.iteration}-${sel.index} is not in the current population${p ? ` (iteration ${p.iteration})` : ''}`);
    const m = p.members.find((x) => x.index === sel.index);
    if (!m) throw new Error(`member-${sel.iteration}-${sel.index} is not in the current population of ${p.members.length}`);
    return m;
  }

  private prepare(row: GenerateRow): PreparedRow {
    let ids = row.promptIds ?? (row.messages ? this.model.tokenizer.encodeChat(row.messages, row.tools) : undefined);
    if (!ids || ids.length === 0) throw new Error('a generate row needs non-empty messages or promptIds');
    const V = this.shape.vocabSize;
    const bad = ids.find((id) => !Number.isInteger(id) || id < 0 || id >= V);
    if (bad !== undefined) throw new Error(`prompt token id ${bad} is outside the vocabulary (0..${V - 1})`);
    const budget = this.contextLength - row.maxNewTokens;
    if (ids.length > budget) {
      if (this.options.contextPolicy !== 'truncate-left' || budget < 1) {
        throw new ContextLengthError(`prompt of ${ids.length} tokens + max ${row.maxNewTokens} new tokens exceeds the context length ${this.contextLength} (${this.contextSource})`);
      }
      ids = ids.slice(ids.length - budget);
    }
    let allowed: Uint8Array | undefined;
    if (row.allowedTokenIds) {
      allowed = new Uint8Array(V);
      for (const id of row.allowedTokenIds) {
        if (!Number.isInteger(id) || id < 0 || id >= V) throw new Error(`allowed token id ${id} is outside the vocabulary (0..${V - 1})`);
        allowed[id] = 1;
      }
      for (const id of this.eosIds) allowed[id] = 1;
    }
    const constraint = row.constraint ? this.tokenConstraint(row.constraint) : undefined;
    return { promptIds: ids, sampling: row.sampling, maxNewTokens: row.maxNewTokens, stop: row.stop, allowed, constraint, ignoreEos: row.ignoreEos, signal: row.signal, onText: row.onText };
  }

  private tokenConstraint(c: ActionConstraint): TokenConstraint {
    const dfa = compileConstraint(c);
    let compiled = this.constraints.get(dfa);
    if (!compiled) {
      this.tokenTexts ??= vocabularyTexts(this.model.tokenizer, this.shape.vocabSize);
      compiled = new TokenConstraint(dfa, this.tokenTexts, this.eosIds);
      this.constraints.set(dfa, compiled);
    }
    return compiled;
  }

  /** Low-rank and LoRA mode's extra inputs are per row (their factors) beside `shared` ones; full mode's the same for every row (θ as inputs). */
  private extraFeeds(chunk: number[], feeds: (chunk: number[]) => Record<string, ort.Tensor>, shared: Record<string, ort.Tensor> = {}): Pick<DecodeContext, 'extraFeeds' | 'rowFeeds'> {
    return this.mode === 'full' ? { extraFeeds: { ...shared, ...feeds(chunk) } } : { extraFeeds: shared, rowFeeds: (rows) => feeds(rows.map((j) => chunk[j])) };
  }

  /**
   * Decodes rows `indices` of `rows` on `session` in batches of maxBatch, writing their results into `out`;
   * each batch starts from the prefixes cached for the rows' owners and stores what it computed.
   */
  private async decode(session: ort.InferenceSession, indices: number[], rows: PreparedRow[], owners: string[], current: (k: number) => boolean, out: GenerateResult[], feeds: (chunk: number[]) => Record<string, ort.Tensor>, shared?: Record<string, ort.Tensor>): Promise<void> {
    const max = this.options.maxBatch ?? 32;
    const cache = this.prefixCache;
    if (keepsKvOnDevice(this.options)) this.device ??= DeviceTensors.create({ ...this.shape, profileDir: this.options.profileDir });
    const device = (this.deviceMade = await this.device) ?? undefined;
    for (let i = 0; i < indices.length; i += max) {
      const chunk = indices.slice(i, i + max);
      const ctx = { session, shape: this.shape, tokenizer: this.model.tokenizer, eosIds: this.eosIds, padId: this.padId, ...this.extraFeeds(chunk, feeds, shared), device, onStep: this.options.onDecodeStep };
      const hits = chunk.map((k) => cache?.lookup(owners[k], rows[k].promptIds) ?? undefined);
      // Prefixes widen the batch to the longest prefix + the longest uncached rest: past the context, the
      // batch prefills whole prompts as without the cache, so no graph sees a longer sequence than before.
      const span = Math.max(0, ...hits.map((h) => h?.length ?? 0)) + Math.max(...chunk.map((k, j) => rows[k].promptIds.length - (hits[j]?.length ?? 0))) + Math.max(...chunk.map((k) => rows[k].maxNewTokens));
      const batch = chunk.map((k, j): PreparedRow => {
        if (!cache) return rows[k];
        const keep = (block: KvBlock) => {
          if (current(k)) cache.store(owners[k], block);
        };
        return { ...rows[k], prefix: span <= this.contextLength ? hits[j] : undefined, keep };
      });
      const results = await decodeBatch(ctx, batch);
      chunk.forEach((k, j) => (out[k] = results[j]));
    }
  }
}

/** The dtype the graph's KV caches are fed in (fp16 exports keep them fp16). */
function kvTypeOf(model: LoadedModel): 'float32' | 'float16' {
  const past = model.graph.graph.input.find((i) => i.name === 'past_key_values.0.key');
  return past?.type?.tensorType?.elemType === DataType.FLOAT16 ? 'float16' : 'float32';
}
