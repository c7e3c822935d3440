/**
 * Builds an Engine: opens the model (a built preset or an export directory), picks the member-members
 * strategy for the run's mode and full-mode weights, rewrites the graph for it, and makes its sessions.
 */
import { availableParallelism } from 'node:os';
import * as ort from 'onnxruntime-node';
import { layoutSegments } from '../../../shared/es.ts';
import { initLoraAdapters } from '../../../shared/lora.ts';
import type { Engine, EngineOptions } from '../engine.ts';
import { lowRankRewrite } from '../perturbation/lowrank-graph.ts';
import { PerturbationPool } from '../perturbation/perturbation-pool.ts';
import { weightsAsInputs } from '../perturbation/weights-as-inputs.ts';
import type { ModelProto } from '../onnx/proto.ts';
import type { LoadedModel } from './model-dir.ts';
import { fuseAttention } from './fused-attention.ts';
import { handOverWeights } from './weight-handover.ts';
import { OnnxEngine, type KvCacheForm } from './onnx-engine.ts';
import { openModel } from './open-model.ts';
import { createOrtFormatSession, ORT_FORMAT_LIMIT, ortFormatModel, ortFormatRuns } from './ort-format.ts';
import { FullInputsMembers } from '../members/full-inputs.ts';
import { pointWeightsAt } from '../members/full-mode-switch.ts';
import { FullRebuildSessionMembers } from '../members/full-rebuild-session.ts';
import { LowRankMembers } from '../members/lowrank.ts';
import { LoraMembers } from '../members/lora.ts';
import { loraMatrices, loraSegments } from './lora-matrices.ts';
import { loraRewrite } from '../perturbation/lora-graph.ts';
import { TargetTensors } from './target-tensors.ts';
import { createSession, INLINE_SESSION_LIMIT, keepsKvOnDevice, sessionOptionsFor } from './sessions.ts';
import { FullDeviceMembers } from '../members/full-device.ts';
import { pieceInputs, weightPieces } from '../perturbation/weight-pieces.ts';

export async function createEngine(options: EngineOptions): Promise<Engine> {
  return createOnnxEngine(openModel(options.model), options);
}

export async function createOnnxEngine(model: LoadedModel, options: EngineOptions): Promise<OnnxEngine> {
  const what = model.file ?? `${model.dir}/model.onnx`;
  const { graph: decoder, kv } = attentionGraph(model, options, what);
  const hasPositionIds = model.graph.graph.input.some((i) => i.name === 'position_ids');
  // a session from the graph reads an fp16 export's weights as written from their fp32 masters
  const fromGraph = (graph: ModelProto, handOver?: () => void) => () => (model.half ? model.half.withInitializers(model.weights, () => createSession(graph, options, what, undefined, handOver)) : createSession(graph, options, what, undefined, handOver));
  if (options.mode === 'lowrank') {
    const { model: graph, targets, groups } = lowRankRewrite(decoder, model.weights, what);
    const newSession = fromGraph(graph);
    const targetTensors = new TargetTensors(model, targets.map((t) => t.weight), "low-rank mode's matrices");
    const members = new LowRankMembers(model, await newSession(), targets, groups, newSession, targetTensors);
    return new OnnxEngine('lowrank', model, layoutSegments(model.weights), members, targetTensors, options, hasPositionIds, kv);
  }
  if (options.mode === 'lora') {
    if (!options.lora) throw new Error(`${what}: lora mode needs the adapters' options (rank, alpha, targets) and the run seed`);
    const { layout, targetTensors } = loraMatrices(model, options.lora);
    const rewritten = loraRewrite(decoder, model.weights, layout, what);
    const theta = initLoraAdapters(layout, options.lora.seed);
    const segments = loraSegments(theta, layout);
    // W stays an initializer, prepacked by onnxruntime (as inference serves it), and LoRA never changes it: the
    // session reads it from its scratch file and this process's copies are handed over, so W is held once
    const session = await fromGraph(rewritten, () => handOverWeights(model))();
    const members = new LoraMembers(session, layout, theta, segments);
    return new OnnxEngine('lora', model, segments, members, targetTensors, options, hasPositionIds, kv);
  }
  const device = deviceRoute(model, options);
  // which route serves full mode's members off the CPU, said once per engine
  if (options.mode === 'full' && (options.executionProvider ?? 'cpu') !== 'cpu') {
    const route = device === true ? 'θ stays on the device and each member is made there (noise esopt-device-noise)' : `each member is made on the host and uploaded (${device})`;
    process.emitWarning(`${what}: full mode on ${options.executionProvider}: ${route}`, { code: 'ESOPT_MEMBER_ROUTE' });
  }
  if (device === true) {
    const switcher = await PerturbationPool.create(0);
    const targetTensors = new TargetTensors(model, model.weights.map((_, i) => i), "full mode's tensors");
    const theta = { model, segments: layoutSegments(model.weights), switcher, targets: targetTensors };
    const pieces = weightPieces(theta.segments, options.devicePieceElements);
    const session = await createSession(pieceInputs(weightsAsInputs(decoder, model.weights), model.weights, pieces), options, what);
    const members = await FullDeviceMembers.create(theta, session, pieces, options.deviceGroupElements, options.profileDir).catch(async (err: Error) => {
      await session.release();
      await switcher.close();
      throw err;
    });
    return new OnnxEngine('full', model, theta.segments, members, targetTensors, options, hasPositionIds, kv);
  }
  const threads = switchThreads(options, model);
  const rebuild = options.fullModeWeights === 'rebuild-session';
  // θ moves into an ORT-format model when it fits one, and only with one switch thread: all of θ is then
  // one buffer, which could not be dealt to worker threads tensor by tensor; and only where the provider runs it.
  const thetaBytes = model.weights.reduce((a, w) => a + w.data.byteLength, 0);
  // (fp16 weights are not their masters' bytes, so an fp16 export builds member sessions from the graph)
  const ortModel = rebuild && threads === 1 && thetaBytes <= ORT_FORMAT_LIMIT && !model.half && ortFormatRuns(options.executionProvider ?? 'cpu') ? await ortFormatModel(decoder, model.weights, sessionOptionsFor(options), what, INLINE_SESSION_LIMIT) : null;
  if (ortModel) pointWeightsAt(model, ortModel.views);
  const graph = rebuild ? decoder : weightsAsInputs(decoder, model.weights);
  // θ as inputs: an fp16 export's weights are fed from their masters, so the graph's fp16 bytes can go
  if (!rebuild) model.half?.dropInitializers();
  const newSession = ortModel ? () => createOrtFormatSession(ortModel, sessionOptionsFor(options), what) : rebuild ? fromGraph(graph) : () => createSession(graph, options, what);
  const session = await newSession();
  const switcher = await PerturbationPool.create(threads - 1).catch(async (err: Error) => {
    await session.release();
    throw new Error(`${what}: could not start full mode's perturbation threads: ${err.message}`);
  });
  // The strategy and the engine share θ's segment objects: the switcher re-points their views.
  const targetTensors = new TargetTensors(model, model.weights.map((_, i) => i), "full mode's tensors");
  const theta = { model, segments: layoutSegments(model.weights), switcher, targets: targetTensors };
  const members = rebuild ? new FullRebuildSessionMembers(theta, session, newSession) : new FullInputsMembers(theta, session);
  return new OnnxEngine('full', model, theta.segments, members, targetTensors, options, hasPositionIds, kv);
}

/**
 * The plain model as an inference server holds it, for comparisons with training (bench lora): the engine's
 * attention form, W as initializers onnxruntime prepacks from a file it reads, this process's copies handed
 * over, so W is held once. `model`'s weights read as empty afterwards.
 */
export async function createServingSession(model: LoadedModel, options: EngineOptions): Promise<ort.InferenceSession> {
  const what = model.file ?? `${model.dir}/model.onnx`;
  const { graph } = attentionGraph(model, options, what);
  const make = () => createSession(graph, options, what, undefined, () => handOverWeights(model));
  return model.half ? model.half.withInitializers(model.weights, make) : make();
}

/**
 * Whether full mode makes its members on the device (members/full-device.ts): webgpu, the run's noise
 * 'esopt-device-noise', θ as inputs, the caches kept there and fp32 weights; else why not.
 */
function deviceRoute(model: LoadedModel, options: EngineOptions): true | string {
  if (options.mode !== 'full') return `${options.mode} mode`;
  if (options.noise !== 'esopt-device-noise') return `the run's noise is ${options.noise ?? 'esopt-noise'}, which only the host makes`;
  if (options.executionProvider !== 'webgpu') return `the ${options.executionProvider ?? 'cpu'} provider has no device route`;
  if (options.fullModeWeights === 'rebuild-session') return "fullModeWeights 'rebuild-session' builds a session per member on the host";
  if (!keepsKvOnDevice(options)) return 'kvOnDevice is false';
  if (model.half) return 'an fp16 export feeds fp16 weights, and the device noise graph makes float32 ones';
  return true;
}

/**
 * The graph the engine's sessions run: the model's own, or its attention fused with caches that grow in
 * place (fused-attention.ts) where that is wanted, the provider is the CPU and the graph is recognised. A
 * fallback to the unfused graph that the caller did not ask for is said as a warning, with the reason.
 */
function attentionGraph(model: LoadedModel, options: EngineOptions, what: string): { graph: ModelProto; kv: KvCacheForm } {
  const wanted = options.inPlaceKv ?? process.env.ESOPT_IN_PLACE_KV !== '0';
  if (!wanted) return { graph: model.graph, kv: { inPlace: false, reason: 'turned off (inPlaceKv false or ESOPT_IN_PLACE_KV=0)' } };
  const provider = options.executionProvider ?? 'cpu';
  const fused = provider === 'cpu' ? fuseAttention(model.graph, model.config) : { fused: false as const, reason: `the ${provider} provider keeps its caches as it has (the in-place caches are the CPU provider's)` };
  if (fused.fused) return { graph: fused.model, kv: { inPlace: true } };
  process.emitWarning(`${what}: KV caches are concatenated each step, not grown in place: ${fused.reason}`, { code: 'ESOPT_UNFUSED_ATTENTION' });
  return { graph: model.graph, kv: { inPlace: false, reason: fused.reason } };
}

/**
 * θ's size (elements) from which full mode's switch uses every core by default: each worker thread is a
 * V8 isolate whose memory counts against "training memory = inference memory", which only pays off once a
 * one-thread switch of θ would take seconds (docs/BENCHMARKS.md).
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
