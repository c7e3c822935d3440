/**
 * The Engine on onnxruntime-node. One LoadedModel (built preset or export directory) holds θ; the graph is
 * rewritten for the run's perturbation mode:
 *   full     θ as graph inputs; a member is served by perturbing θ in place (exactly undoable), running
 *            its rows, restoring. Queued rows are grouped by member so θ switches once per member per call.
 *   lowrank  W stays an initializer; per-row factor inputs carry each row's member, so one forward pass
 *            serves rows of many members. The update is folded into W and the session rebuilt in-process.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { applyDenseUpdate, layoutSegments, type ParameterSegment } from '../../shared/es.ts';
import { accumulateLowRank } from '../../shared/lowrank.ts';
import type { ActionConstraint, ChatMessage } from '../../shared/ports/policy.ts';
import type { Member } from '../../shared/schemas/index.ts';
import type { Engine, EngineOptions, EngineUpdate, GenerateResult, GenerateRow, MemberSelector, PerturbationMode, Population } from '../engine.ts';
import { decodeBatch, type DecoderShape, type PreparedRow } from '../generation/decode-loop.ts';
import { compileConstraint } from '../generation/regex-automaton.ts';
import { TokenConstraint, vocabularyTexts } from '../generation/token-constraint.ts';
import type { Perturbation } from '../perturbation/exact-perturbation.ts';
import { FactorCache, lowRankOffsets, zeroFactorFeeds } from '../perturbation/lowrank-factors.ts';
import { lowRankRewrite, type LowRankGroup, type LowRankTarget } from '../perturbation/lowrank-graph.ts';
import { PerturbationPool } from '../perturbation/perturbation-pool.ts';
import { weightsAsInputs } from '../perturbation/weights-as-inputs.ts';
import { eosTokenIds, headDim, kvHeads } from './config.ts';
import type { LoadedModel } from './model-dir.ts';
import { MODEL_FILE, writeOnnxWithExternalData } from './onnx/external-data.ts';
import { encodeModel, type ModelProto } from './onnx/proto.ts';
import { openModel } from './open-model.ts';
import { createOrtFormatSession, ORT_FORMAT_LIMIT, ortFormatModel, type OrtFormatModel } from './ort-format.ts';

export class ContextLengthError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ContextLengthError';
  }
}

/**
 * Graphs whose initializers reach this many bytes go to onnxruntime as files rather than as one protobuf
 * in memory: protobuf caps a message at 2 GiB (and protobufjs took 83 s to encode a 1 GiB tensor).
 * Below it the in-memory path stays: sessions made from files measured within a few percent of it, but
 * not clearly the same (docs/MODEL.md), and small graphs have nothing to gain.
 */
export const INLINE_SESSION_LIMIT = 2 ** 30;

/**
 * An onnxruntime session for `model`. Past `inlineLimit` bytes of initializers, the graph goes through a
 * scratch directory in the export layout (model.onnx + external data, written tensor by tensor) and
 * onnxruntime reads it from there; the directory is removed once `create` returns. ESOPT_SESSION_DIR
 * (default: the system's temporary directory) says where it goes: it needs room for θ once.
 */
export async function createSession(model: ModelProto, options: Pick<EngineOptions, 'executionProvider' | 'threads'>, what: string, inlineLimit = INLINE_SESSION_LIMIT): Promise<ort.InferenceSession> {
  const provider = options.executionProvider ?? 'cpu';
  const sessionOptions = sessionOptionsFor(options);
  const create = async (start: () => Promise<ort.InferenceSession>) => {
    try {
      return await start();
    } catch (err) {
      throw new Error(`${what}: onnxruntime could not create a session with the ${provider} execution provider: ${(err as Error).message}`);
    }
  };
  const initializerBytes = model.graph.initializer.reduce((a, t) => a + (t.rawData?.length ?? 0), 0);
  if (initializerBytes < inlineLimit) return create(() => ort.InferenceSession.create(encodeModel(model), sessionOptions));
  const scratchError = (err: unknown) => new Error(`${what}: could not write the session's graph to a scratch directory (ESOPT_SESSION_DIR): ${(err as Error).message}`);
  let dir: string;
  try {
    dir = mkdtempSync(join(process.env.ESOPT_SESSION_DIR || tmpdir(), 'esopt-session-'));
  } catch (err) {
    throw scratchError(err);
  }
  try {
    try {
      writeOnnxWithExternalData(dir, model);
    } catch (err) {
      throw scratchError(err);
    }
    return await create(() => ort.InferenceSession.create(join(dir, MODEL_FILE), sessionOptions));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** onnxruntime's options for every session of an engine. */
export function sessionOptionsFor(options: Pick<EngineOptions, 'executionProvider' | 'threads'>): ort.InferenceSession.SessionOptions {
  return {
    executionProviders: [options.executionProvider ?? 'cpu'],
    graphOptimizationLevel: 'all',
    ...(options.threads ? { intraOpNumThreads: options.threads } : {}),
  };
}

export async function createEngine(options: EngineOptions): Promise<Engine> {
  const model = openModel(options.model);
  return OnnxEngine.create(model, options);
}

export class OnnxEngine implements Engine {
  private population: Population | null = null;
  private factorCache: FactorCache | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private readonly segmentList: ParameterSegment[];
  private readonly shape: DecoderShape;
  private readonly eosIds: Set<number>;
  private readonly padId: number;
  /** The vocabulary's token texts, built on the first constrained row. */
  private tokenTexts: Array<string | null> | null = null;
  /** Compiled constraints by automaton, so their per-state masks survive across requests. */
  private readonly constraints = new WeakMap<object, TokenConstraint>();
  readonly contextLength: number;

  private constructor(
    readonly mode: PerturbationMode,
    private readonly model: LoadedModel,
    /**
     * The session for θ itself. rebuild-session releases it while a member's session serves, so the process
     * holds one prepacked copy of θ at a time, and makes it again when θ's own rows come (`baseSession`).
     */
    private session: ort.InferenceSession | null,
    private readonly graph: ModelProto,
    private readonly targets: LowRankTarget[],
    private readonly groups: LowRankGroup[],
    private readonly options: EngineOptions,
    /** Full mode: perturb / restore / switch θ on this many threads (a pool with no workers is this thread alone). */
    private readonly switcher: PerturbationPool | null,
    /** rebuild-session weights: the ORT-format model θ lives in, when it can (ort-format.ts); null otherwise. */
    private readonly ortModel: OrtFormatModel | null = null,
  ) {
    const c = model.config;
    this.segmentList = layoutSegments(model.weights);
    this.shape = {
      layers: c.num_hidden_layers,
      kvHeads: kvHeads(c),
      headDim: headDim(c),
      vocabSize: c.vocab_size,
      hasPositionIds: graph.graph.input.some((i) => i.name === 'position_ids'),
    };
    const eos = model.tokenizer.eosToken === undefined ? undefined : model.tokenizer.tokenId(model.tokenizer.eosToken);
    this.eosIds = new Set([...eosTokenIds(c), ...(eos === undefined ? [] : [eos])]);
    this.padId = c.pad_token_id ?? [...this.eosIds][0] ?? 0;
    this.contextLength = c.max_position_embeddings;
  }

  static async create(model: LoadedModel, options: EngineOptions): Promise<OnnxEngine> {
    const what = `${model.dir}/model.onnx`;
    if (options.mode === 'full') {
      const threads = switchThreads(options, model);
      const rebuild = options.fullModeWeights === 'rebuild-session';
      // θ moves into an ORT-format model when it fits one, and only with one switch thread: all of θ is
      // then one buffer, which could not be dealt to worker threads tensor by tensor.
      const thetaBytes = model.weights.reduce((a, w) => a + w.data.byteLength, 0);
      const ortModel = rebuild && threads === 1 && thetaBytes <= ORT_FORMAT_LIMIT ? await ortFormatModel(model.graph, model.weights, sessionOptionsFor(options), what, INLINE_SESSION_LIMIT) : null;
      if (ortModel) pointWeightsAt(model, ortModel.views);
      const graph = rebuild ? model.graph : weightsAsInputs(model.graph, model.weights);
      const session = ortModel ? await createOrtFormatSession(ortModel, sessionOptionsFor(options), what) : await createSession(graph, options, what);
      const switcher = await PerturbationPool.create(threads - 1).catch(async (err: Error) => {
        await session.release();
        throw new Error(`${what}: could not start full mode's perturbation threads: ${err.message}`);
      });
      return new OnnxEngine('full', model, session, graph, [], [], options, switcher, ortModel);
    }
    const { model: graph, targets, groups } = lowRankRewrite(model.graph, model.weights, what);
    return new OnnxEngine('lowrank', model, await createSession(graph, options, what), graph, targets, groups, options, null);
  }

  /** The model's tokenizer (chat template, encode/decode). */
  get tokenizer() {
    return this.model.tokenizer;
  }

  setPopulation(p: Population | null): void {
    this.population = p;
    this.factorCache = p && this.mode === 'lowrank' ? new FactorCache(this.targets, this.groups, p) : null;
  }

  segments(): ParameterSegment[] {
    return this.segmentList;
  }

  withRestoredWeights<T>(fn: (segments: ParameterSegment[]) => T | Promise<T>): Promise<T> {
    return this.exclusive(async () => fn(this.segmentList));
  }

  countTokens(messages: ChatMessage[]): number {
    return this.model.tokenizer.encodeChat(messages).length;
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
    return this.exclusive(() => (this.mode === 'full' ? this.generateFull(prepared, members) : this.generateLowRank(prepared, members)));
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
    let ids = row.promptIds ?? (row.messages ? this.model.tokenizer.encodeChat(row.messages) : undefined);
    if (!ids || ids.length === 0) throw new Error('a generate row needs non-empty messages or promptIds');
    const V = this.shape.vocabSize;
    const bad = ids.find((id) => !Number.isInteger(id) || id < 0 || id >= V);
    if (bad !== undefined) throw new Error(`prompt token id ${bad} is outside the vocabulary (0..${V - 1})`);
    const budget = this.contextLength - row.maxNewTokens;
    if (ids.length > budget) {
      if (this.options.contextPolicy !== 'truncate-left' || budget < 1) {
        throw new ContextLengthError(`prompt of ${ids.length} tokens + max ${row.maxNewTokens} new tokens exceeds the context length ${this.contextLength}`);
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

  /** The session for θ itself, made again if rebuild-session released it for a member's. */
  private async baseSession(): Promise<ort.InferenceSession> {
    this.session ??= await this.newSession();
    return this.session;
  }

  /**
   * After the switcher lent θ's tensors to its threads, `segmentList[i].data` are new views onto the same
   * memory and the old ones are detached: point the model's tensors and its graph's initializer bytes
   * (which rebuild-session encodes) at the new views.
   */
  private relinkWeights(): void {
    if (this.segmentList.every((s, i) => this.model.weights[i].data === s.data)) return; // one thread: nothing was lent
    pointWeightsAt(this.model, this.segmentList.map((s) => s.data));
  }

  /** A session for θ as it is now: from the ORT-format model θ lives in, or by encoding the graph. */
  private newSession(): Promise<ort.InferenceSession> {
    const what = `${this.model.dir}/model.onnx`;
    return this.ortModel ? createOrtFormatSession(this.ortModel, sessionOptionsFor(this.options), what) : createSession(this.graph, this.options, what);
  }

  private weightFeeds(): Record<string, ort.Tensor> {
    return Object.fromEntries(this.model.weights.map((w) => [w.name, new ort.Tensor('float32', w.data, w.dims)]));
  }

  private get rebuildsPerMember(): boolean {
    return this.mode === 'full' && this.options.fullModeWeights === 'rebuild-session';
  }

  private async inBatches(session: ort.InferenceSession, indices: number[], rows: PreparedRow[], out: GenerateResult[], feeds: (chunk: number[]) => Record<string, ort.Tensor>): Promise<void> {
    const max = this.options.maxBatch ?? 32;
    for (let i = 0; i < indices.length; i += max) {
      const chunk = indices.slice(i, i + max);
      const ctx = { session, shape: this.shape, tokenizer: this.model.tokenizer, eosIds: this.eosIds, padId: this.padId, extraFeeds: feeds(chunk) };
      const results = await decodeBatch(ctx, chunk.map((k) => rows[k]));
      chunk.forEach((k, j) => (out[k] = results[j]));
    }
  }

  private async generateFull(rows: PreparedRow[], members: Array<Member | null>): Promise<GenerateResult[]> {
    const out = new Array<GenerateResult>(rows.length);
    const groups = new Map<number, number[]>(); // member index (−1 = base) → row indices, in arrival order
    members.forEach((m, i) => groups.set(m ? m.index : -1, [...(groups.get(m ? m.index : -1) ?? []), i]));
    // Base first, then members by noise, + before −, so antithetic partners run back to back and θ goes
    // from one to the other in one pass over ε (switchPerturbation) instead of a restore and a perturb.
    const order = [...groups.values()].map((rowIdx) => ({ rowIdx, member: members[rowIdx[0]] }));
    order.sort((a, b) => (a.member?.noiseIndex ?? -1) - (b.member?.noiseIndex ?? -1) || (b.member?.sign ?? 0) - (a.member?.sign ?? 0));
    const p = this.population;
    const theta = this.segmentList;
    const switcher = this.switcher!;
    let current: Perturbation | null = null;
    try {
      for (const { rowIdx, member } of order) {
        if (!member) {
          if (current) await switcher.restore(theta, current);
          current = null;
        } else {
          const c = member.sign * p!.sigma;
          if (current && current.key.member === member.noiseIndex) current = await switcher.switchTo(theta, current, c);
          else {
            if (current) await switcher.restore(theta, current);
            current = null; // θ is restored: a throw in perturb must not restore it twice
            current = await switcher.perturb(theta, { runSeed: p!.runSeed, iteration: p!.iteration, member: member.noiseIndex }, c);
          }
        }
        this.relinkWeights();
        // rebuild-session: a session made from θ + σ·sign·ε (the ORT-format bytes θ lives in, or the graph
        // whose initializer bytes are views onto θ), released before θ changes again; the base session goes
        // first, so only one prepacked copy of θ exists at a time
        let memberSession: ort.InferenceSession | null = null;
        if (current && this.rebuildsPerMember) {
          await this.session?.release();
          this.session = null;
          memberSession = await this.newSession();
        }
        // θ's views change with every switch, so the feeds that wrap them are made after it
        const feeds = this.rebuildsPerMember ? {} : this.weightFeeds();
        try {
          await this.inBatches(memberSession ?? (await this.baseSession()), rowIdx, rows, out, () => feeds);
        } finally {
          await memberSession?.release();
        }
      }
    } finally {
      if (current) await switcher.restore(theta, current);
      this.relinkWeights();
    }
    return out;
  }

  private async generateLowRank(rows: PreparedRow[], members: Array<Member | null>): Promise<GenerateResult[]> {
    const out = new Array<GenerateResult>(rows.length);
    const all = rows.map((_, i) => i);
    await this.inBatches(await this.baseSession(), all, rows, out, (chunk) =>
      this.factorCache ? this.factorCache.feeds(chunk.map((k) => members[k])) : zeroFactorFeeds(this.targets, this.groups, chunk.length),
    );
    return out;
  }

  commitUpdate(): Promise<void> {
    return this.exclusive(() => this.refresh());
  }

  private async refresh(): Promise<void> {
    if (this.mode === 'full' && !this.rebuildsPerMember) return; // the session reads θ from the live arrays on every run
    // The new session is made from θ as updated (its ORT-format bytes, or the graph whose initializer bytes
    // are views onto θ). The old session goes first (nothing runs meanwhile: refresh is exclusive), so a
    // refresh never holds two weight copies.
    await this.session?.release();
    // rebuild-session makes it when θ's own rows come (a member's session may be needed first)
    this.session = this.rebuildsPerMember ? null : await this.newSession();
  }

  applyUpdate(u: EngineUpdate): Promise<void> {
    return this.exclusive(async () => {
      if (this.mode === 'full') {
        applyDenseUpdate(this.segmentList, u.runSeed, u.iteration, u.coefficients, { decay: u.decay ?? 0 });
        await this.refresh();
        return;
      }
      const offsets = lowRankOffsets(this.targets, u.rank);
      this.targets.forEach((t, j) => {
        const W = this.model.weights[t.weight].data;
        if (u.decay) for (let i = 0; i < W.length; i++) W[i] *= 1 - u.decay;
        accumulateLowRank(W, t.m, t.n, u.rank, u.coefficients.map((c) => ({ key: { runSeed: u.runSeed, iteration: u.iteration, member: c.noiseIndex }, offset: offsets[j], coef: c.coef })));
      });
      this.factorCache = null;
      await this.refresh();
      if (this.population) this.setPopulation(this.population);
    });
  }

  close(): Promise<void> {
    return this.exclusive(async () => {
      await this.switcher?.close();
      await this.session?.release();
    });
  }
}

/** Points the model's tensors, and its graph's initializer bytes (what encoding the graph reads), at `views`. */
function pointWeightsAt(model: LoadedModel, views: readonly Float32Array[]): void {
  const byName = new Map(model.graph.graph.initializer.map((t) => [t.name, t]));
  model.weights.forEach((w, i) => {
    const data = views[i];
    if (w.data === data) return;
    w.data = data;
    const init = byName.get(w.name);
    if (init) init.rawData = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  });
}

/**
 * θ's size from which full mode's switch uses every core by default: 2^29 elements (2 GiB of float32).
 * Each worker thread is a V8 isolate of its own, ≈ 25 MB idle plus its fix-up lists' garbage until its own
 * GC runs (measured on `small`: training peak RSS 1.07–1.15× generation with 2 threads against ≈ 1.02× with
 * one, docs/MODEL.md); from this size on that is a few percent of the process at most, while a one-thread
 * switch of θ would take seconds.
 */
const SWITCH_THREADS_FROM = 2 ** 29;

/** Threads for full mode's switch: as configured, else every core for θ of SWITCH_THREADS_FROM elements or more. */
function switchThreads(options: EngineOptions, model: LoadedModel): number {
  if (options.switchThreads !== undefined) {
    if (!Number.isInteger(options.switchThreads) || options.switchThreads < 1) throw new RangeError(`switchThreads must be an integer ≥ 1, got ${options.switchThreads}`);
    return options.switchThreads;
  }
  const elements = model.weights.reduce((a, w) => a + w.data.length, 0);
  return elements >= SWITCH_THREADS_FROM ? availableParallelism() : 1;
}
