/**
 * A run as a portable artifact (shared/schemas/run-artifact.ts, docs/REPLAY.md): θ_0's hash and layout,
 * the noise definition, and every logged update's coefficients exactly as the trainer applies them, so
 * θ_K can be rebuilt from θ_0 in another framework. θ's layout is the engine's own (the model opened as
 * `createEngine` opens it, laid out by `layoutSegments`), without building an inference session.
 */
import { resolveModelSpec } from '../model-store/resolve-model.ts';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { layoutSegments, type ParameterSegment } from '../../../shared/es.ts';
import { keys } from '../../../shared/keys.ts';
import { NOISE_DEFINITION } from '../../../shared/noise.ts';
import { DEVICE_NOISE_DEFINITION } from '../../../shared/device-noise.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import { IterationManifest, RUN_ARTIFACT_FORMAT, RunArtifact, type ArtifactUpdate, type LogEntry } from '../../../shared/schemas/index.ts';
import { hashTheta } from '../../../shared/theta-hash.ts';
import { targetsAll } from '../../../shared/targets.ts';
import { readLog } from '../loop/index.ts';
import { readRunConfig } from '../loop/index.ts';
import { readJson } from '../../../shared/store/json.ts';
import { coefficientsOf } from '../loop/index.ts';
import { openModel } from '../../engine/model/open-model.ts';
import { TargetTensors } from '../../engine/model/target-tensors.ts';
import { lowRankOffsets } from '../../engine/perturbation/lowrank-factors.ts';
import { lowRankRewrite } from '../../engine/perturbation/lowrank-graph.ts';
import { runArtifactText } from './run-artifact-text.ts';

export interface BuiltRunArtifact {
  artifact: RunArtifact;
  /** θ_0 as the model holds it, in the artifact's layout (its hash is `artifact.theta0Hash`). */
  theta0: ParameterSegment[];
}

/** The update of one log entry, its coefficients computed by the same function replay uses. */
function artifactUpdate(entry: LogEntry): ArtifactUpdate {
  return {
    iteration: entry.iteration,
    runSeed: entry.runSeed,
    alpha: entry.alpha,
    weightDecay: entry.weightDecay,
    decay: entry.alpha * entry.weightDecay,
    members: entry.members.map((m, i) => ({ noiseIndex: m.noiseIndex, sign: m.sign, normalizedReward: entry.normalizedRewards[i] })),
    coefficients: coefficientsOf(entry),
    thetaHashAfter: entry.thetaHashAfter,
  };
}

export async function buildRunArtifact(store: ObjectStore, run: string): Promise<BuiltRunArtifact> {
  const config = await readRunConfig(store, run);
  if (!config) throw new Error(`run ${run}: no ${keys.config(run)} in the store`);
  if (config.mode === 'lora') {
    throw new Error(`run ${run}: a LoRA run's θ is its adapters, and the artifact format ${RUN_ARTIFACT_FORMAT} describes runs over the model's own tensors; export the model and its adapters instead (esopt export)`);
  }
  const first = await readJson(store, keys.manifest(run, 0), IterationManifest);
  if (!first) throw new Error(`run ${run}: no ${keys.manifest(run, 0)} in the store, so θ_0's hash is unknown`);
  if (first.mode !== config.mode || (config.mode === 'lowrank' && first.rank !== config.rank)) {
    throw new Error(`run ${run}: iteration 0 ran in ${first.mode} mode with rank ${first.rank}, the config says ${config.mode} with rank ${config.rank}`);
  }
  // a named model is the one the run pinned, pulled into the verified cache
  const model = openModel(await resolveModelSpec(config.model, store));
  const theta0 = layoutSegments(model.weights);
  const hash = hashTheta(theta0);
  if (hash !== first.thetaHash) throw new Error(`run ${run}: the model's θ_0 (${hash}) is not the run's θ_0 (${first.thetaHash})`);

  let lowRankTargets: RunArtifact['lowRankTargets'];
  // The tensors the mode perturbs (full: all of θ; low-rank: its matrices), then those the run's targets keep.
  let perturbed = model.weights.map((_, i) => i);
  if (config.mode === 'lowrank') {
    const { targets } = lowRankRewrite(model.graph, model.weights, model.file ?? `${model.dir}/model.onnx`);
    const offsets = lowRankOffsets(targets, config.rank);
    lowRankTargets = targets.map((t, j) => ({ tensor: t.weight, name: t.name, m: t.m, n: t.n, transposed: t.transposed ?? false, offset: offsets[j] }));
    perturbed = targets.map((t) => t.weight);
  }
  const selected = new TargetTensors(model, perturbed, config.mode === 'lowrank' ? "low-rank mode's matrices" : "full mode's tensors").select(config.targets);
  const updated = (i: number) => perturbed.includes(i) && (selected === null || selected.has(i));
  const log = await readLog(store, run);
  const noisy = log.find((e) => (e.noise ?? 'esopt-noise') !== (config.noise ?? 'esopt-noise'));
  if (noisy) throw new Error(`run ${run}: iteration ${noisy.iteration}'s update draws ε from ${noisy.noise ?? 'esopt-noise'}, the config names ${config.noise ?? 'esopt-noise'}`);
  const stray = log.find((e) => JSON.stringify(e.targets ?? 'all') !== JSON.stringify(targetsAll(config.targets) ? 'all' : config.targets));
  if (stray) throw new Error(`run ${run}: iteration ${stray.iteration}'s update targets ${JSON.stringify(stray.targets ?? 'all')}, the config ${JSON.stringify(config.targets)}`);
  const artifact = RunArtifact.parse({
    format: RUN_ARTIFACT_FORMAT,
    run,
    model: config.model,
    theta0Hash: first.thetaHash,
    mode: config.mode,
    rank: config.rank,
    noise: config.noise === 'esopt-device-noise' ? { id: DEVICE_NOISE_DEFINITION.id, version: DEVICE_NOISE_DEFINITION.version } : { id: NOISE_DEFINITION.id, version: NOISE_DEFINITION.version },
    layout: {
      params: theta0.reduce((a, s) => a + s.data.length, 0),
      tensors: theta0.map((s, i) => ({ name: s.name, dims: model.weights[i].dims, offset: s.offset, count: s.data.length, updated: updated(i) })),
    },
    ...(lowRankTargets ? { lowRankTargets } : {}),
    ...(config.tasks.suite?.manifest !== undefined ? { suite: { name: config.tasks.suite.name, manifest: config.tasks.suite.manifest } } : {}),
    ...(config.instructions?.manifest !== undefined ? { instructions: { name: config.instructions.name, manifest: config.instructions.manifest } } : {}),
    updates: log.map(artifactUpdate),
  });
  return { artifact, theta0 };
}

export interface WrittenRunArtifact {
  artifact: RunArtifact;
  /** run.json: the artifact. */
  json: string;
  /** run.txt: the same numbers in the flat text form the reference replay reads (run-artifact-text.ts). */
  text: string;
  /** theta0.bin: θ_0 as raw little-endian fp32 in the layout's order. */
  theta0: string;
}

/** Writes run.json, run.txt and theta0.bin into `outDir` (made if missing). */
export async function writeRunArtifact(store: ObjectStore, run: string, outDir: string): Promise<WrittenRunArtifact> {
  const { artifact, theta0 } = await buildRunArtifact(store, run);
  if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1) throw new Error('theta0.bin is little-endian fp32; this machine is big-endian');
  mkdirSync(outDir, { recursive: true });
  const paths = { json: join(outDir, 'run.json'), text: join(outDir, 'run.txt'), theta0: join(outDir, 'theta0.bin') };
  writeFileSync(paths.json, `${JSON.stringify(artifact, null, 2)}\n`);
  writeFileSync(paths.text, runArtifactText(artifact));
  const bytes = new Uint8Array(artifact.layout.params * 4);
  let at = 0;
  for (const s of theta0) {
    bytes.set(new Uint8Array(s.data.buffer, s.data.byteOffset, s.data.byteLength), at);
    at += s.data.byteLength;
  }
  writeFileSync(paths.theta0, bytes);
  return { artifact, ...paths };
}
