/**
 * The GRPO baseline through the same engine, environments, tasks and evaluation as the ES run: step k
 * samples the ES run's iteration-k training tasks (task-seed.ts), plays G sampled rollouts of each with θ
 * in-process, gives every token of a rollout its group-relative advantage, takes one policy-gradient step
 * with Adam on the decoder gradient (optionally with a KL term to the base model), and writes θ back into
 * the engine. Episodes per step = G × tasks per iteration, so with G = the ES population the
 * training-episode budget is the ES run's. θ_final is
 * evaluated on the held-out tasks through the run's fan-out and store, greedily, exactly like ES's θ.
 */
import { z } from 'zod';
import type { EvaluationResult, RunConfig, TaskRef } from '../../../shared/schemas/index.ts';
import { hashTheta } from '../../../shared/theta-hash.ts';
import { loadEnvironment } from '../../../environments/index.ts';
import { runEpisode } from '../../../environments/episode-runner.ts';
import { openStudyRun } from '../../assembly/run.ts';
import { evaluate } from '../../training/loop/index.ts';
import { iterationTaskSeed } from '../../training/loop/index.ts';
import { loadModelDir } from '../../engine/model/model-dir.ts';
import type { GenerateRow } from '../../engine/engine.ts';
import { DecoderGradient } from '../pretrain/decoder-gradient.ts';
import { GRADIENT_DTYPES } from '../pretrain/gradient-kernels.ts';
import { Adam } from './adam.ts';
import { groupAdvantages } from './advantages.ts';
import { policyGradientStep, type Trajectory } from './policy-gradient.ts';
import { SampledTurnsPolicy } from './sampled-turns-policy.ts';
import { RowCoalescer } from '../../fanout/row-coalescer.ts';

export const GrpoOptions = z
  .object({
    /** Rollouts per task (G). */
    group: z.number().int().min(2),
    learningRate: z.number().positive().finite(),
    /** Sampling temperature of the rollouts (evaluation stays greedy). */
    temperature: z.number().positive().finite().default(1),
    /** Global gradient-norm clip; 0 disables. */
    clipNorm: z.number().min(0).finite().default(1),
    /** β of the k3 KL(π_θ ‖ π_base) term (policy-gradient.ts); 0 (every committed run) holds no reference model. */
    klCoef: z.number().min(0).finite().default(0),
    /** Precision of the gradients and Adam's moments: float64 (every committed run), or float32 as PyTorch keeps them. */
    stateDtype: z.enum(GRADIENT_DTYPES).default('float64'),
  })
  .strict();
export type GrpoOptions = z.infer<typeof GrpoOptions>;

export interface GrpoStepRecord {
  step: number;
  meanReward: number;
  informative: number;
  gradNorm: number;
  /** Mean per-token k3 estimate of KL(π_θ ‖ π_base) before the step; null without a KL term. */
  kl: number | null;
  /** Turn sequences of the step, and how many distinct ones its gradient ran on. */
  sequences: number;
  merged: number;
  /** Wall time of the step's G × tasks rollouts and of its gradient + Adam step. */
  rolloutMs: number;
  gradientMs: number;
}

export interface GrpoResult {
  evaluation: EvaluationResult;
  episodes: number;
  history: GrpoStepRecord[];
}

export interface GrpoInput {
  /** The ES run's config: model, environment, tasks per iteration, iterations (= steps), generation. */
  config: RunConfig;
  grpo: GrpoOptions;
  run: string;
  storeRoot: string;
  evalTasks: readonly TaskRef[];
  onStep?: (s: GrpoStepRecord) => void;
}

export async function runGrpo(o: GrpoInput): Promise<GrpoResult> {
  const { config, grpo } = o;
  // Its episodes sample the environment's generator under the environment's prompt: refused rather than ignored.
  if (config.tasks.suite || config.instructions) throw new Error('GRPO samples the environment\'s own tasks under its own prompt: tasks.suite and instructions are for ES runs (leave them out of this config)');
  if (!('dir' in config.model)) throw new Error('GRPO needs a model export directory (model.dir): its weights are what the decoder gradient differentiates');
  const environment = await loadEnvironment(config.environment.name);
  const options = environment.optionsSchema.parse(config.environment.options);
  const loaded = loadModelDir(config.model.dir);
  const model = new DecoderGradient(loaded.config, loaded.weights.map((w) => ({ name: w.name, dims: w.dims, data: w.data.slice() })));
  const adam = new Adam(model.weights.map((w) => w.data), grpo.learningRate, grpo.stateDtype);
  // The base policy the KL term measures against: the loaded weights, which the model's copy leaves untouched.
  const kl = grpo.klCoef > 0 ? { coef: grpo.klCoef, reference: new DecoderGradient(loaded.config, loaded.weights) } : null;
  const { engine, server, site, close } = await openStudyRun(config, o.storeRoot);
  const history: GrpoStepRecord[] = [];
  let episodes = 0;
  try {
    const byName = new Map(model.weights.map((w) => [w.name, w]));
    for (const s of engine.segments()) if (byName.get(s.name)?.data.length !== s.data.length) throw new Error(`engine tensor ${s.name} has no same-sized weight in ${config.model.dir}`);
    const coalescer = new RowCoalescer(engine);
    const rollouts = { contextLength: engine.contextLength, generate: (row: GenerateRow) => coalescer.generate(row) };
    for (let step = 0; step < config.iterations; step++) {
      const tasks = environment.sampleTasks('train', config.tasks.trainPerIteration, iterationTaskSeed(config.tasks.seed, step), options);
      const trajectories: Trajectory[] = [];
      let rewardSum = 0;
      const started = performance.now();
      // Every rollout of the step at once, their turns batched; each keeps its own seed, so the order is moot.
      const groups = await Promise.all(
        tasks.map((sampled, t) =>
          Promise.all(
            Array.from({ length: grpo.group }, async (_, g) => {
              const policy = new SampledTurnsPolicy(rollouts, loaded.tokenizer, {
                sampling: { temperature: grpo.temperature, topP: 1, topK: 0 },
                seed: ((config.seed * 7919 + step) * 131 + t) * 257 + g,
                maxNewTokens: config.generation.maxTokens,
              });
              const r = await runEpisode({ definition: environment, task: sampled.task, options, policy, seed: 0 });
              return { turns: policy.turns, reward: r.error === null ? r.reward : 0 };
            }),
          ),
        ),
      );
      for (const group of groups) {
        const advantages = groupAdvantages(group.map((x) => x.reward));
        group.forEach((x, g) => trajectories.push({ turns: x.turns, advantage: advantages[g] }));
        rewardSum += group.reduce((a, x) => a + x.reward, 0);
        episodes += group.length;
      }
      const rolled = performance.now();
      const stats = policyGradientStep(model, adam, trajectories, grpo.clipNorm, kl);
      const stepped = performance.now();
      await engine.withRestoredWeights((segments) => {
        for (const s of segments) s.data.set(byName.get(s.name)!.data);
      });
      await engine.commitUpdate();
      const record = { step, meanReward: rewardSum / trajectories.length, informative: stats.informative, gradNorm: stats.gradNorm, kl: stats.kl, sequences: stats.sequences, merged: stats.merged, rolloutMs: rolled - started, gradientMs: stepped - rolled };
      history.push(record);
      o.onStep?.(record);
    }
    const evaluation = await evaluate({
      store: site.store,
      fanout: site.fanout,
      run: o.run,
      config,
      iteration: config.iterations,
      thetaHash: hashTheta(engine.segments()),
      tasks: o.evalTasks,
      policy: { baseUrl: `${server.url}/v1` },
      pollMs: 50,
    });
    return { evaluation, episodes, history };
  } finally {
    await close();
  }
}
