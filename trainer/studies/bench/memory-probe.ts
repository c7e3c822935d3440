/**
 * A child process for `esopt bench memory`: runs one workload on an engine and prints its peak RSS.
 *   train     per iteration: every member generates (perturb, run, restore / per-row factors or adapters), rewards are
 *             folded in with the shared ES core, and the update is applied to θ in place.
 *   generate  the same generate calls with the same shapes, all on the base model, no update.
 *   serve     the same calls on the plain model as an inference server holds it (createServingSession: W
 *             prepacked by onnxruntime and held once), each call's rows in one batch; no engine, no update.
 *   grpo      per iteration: the same rows sampled on the base model (G = population rollouts of `batch`
 *             prompts), then one policy-gradient step as trainer/studies/grpo takes it: a copy of θ for the decoder
 *             gradient, gradients and Adam's two moments in `grpoState` precision, forward + backward over
 *             every rollout; with `grpoKl` > 0 also a reference copy of the base model for the KL term.
 * Usage: node --import tsx trainer/studies/bench/memory-probe.ts '<json options>'
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { ask, tell } from '../../../shared/es.ts';
import { FullModeWeights } from '../../../shared/schemas/index.ts';
import { LoraOptions } from '../../../shared/lora.ts';
import type { GenerateRow, MemberSelector } from '../../engine/engine.ts';
import { openEngine } from '../../assembly/engine.ts';
import { modelSpecFlag } from '../../engine/model/presets.ts';
import { openModel } from '../../engine/model/open-model.ts';
import { createServingSession } from '../../engine/model/create-engine.ts';
import { decodeBatch, type PreparedRow } from '../../engine/generation/decode-loop.ts';
import { decodeContext } from './decode-context.ts';
import { DecoderGradient } from '../pretrain/decoder-gradient.ts';
import { GRADIENT_DTYPES } from '../pretrain/gradient-kernels.ts';
import { Adam } from '../grpo/adam.ts';
import { groupAdvantages } from '../grpo/advantages.ts';
import { policyGradientStep, type Trajectory } from '../grpo/policy-gradient.ts';

const Options = z.object({
  workload: z.enum(['train', 'generate', 'grpo', 'serve']),
  mode: z.enum(['full', 'lowrank', 'lora']),
  /** LoRA mode: the adapters' rank, alpha and matrices. */
  lora: LoraOptions.optional(),
  /** A preset's name or an export directory (engine/model/presets.ts `modelSpecFlag`). */
  model: z.string().min(1),
  population: z.number().int().min(2),
  batch: z.number().int().min(1),
  promptTokens: z.number().int().min(1),
  newTokens: z.number().int().min(1),
  iterations: z.number().int().min(1),
  switchThreads: z.number().int().min(1).optional(),
  fullModeWeights: FullModeWeights.default('inputs'),
  grpoState: z.enum(GRADIENT_DTYPES).default('float64'),
  grpoKl: z.number().min(0).default(0),
  /** The engine's prefix KV cache budget (absent: the engine's default); 0 where the child it is compared with caches none. */
  prefixCacheBytes: z.number().int().min(0).optional(),
});

const o = Options.parse(JSON.parse(process.argv[2] ?? '{}'));
if ((o.mode === 'lora') !== (o.lora !== undefined)) throw new Error('memory probe: lora options go with mode lora, and only with it');
const prompt = (b: number) => Array.from({ length: o.promptTokens }, (_, j) => (b * 13 + j * 5 + 1) % 256);
// Each member's rows sample their own stream: GRPO's rollouts of a prompt must differ, or their ±1
// advantages cancel when identical sequences merge and the step differentiates nothing.
const row = (member: MemberSelector, index: number, b: number): GenerateRow => ({
  promptIds: prompt(b),
  member,
  sampling: { temperature: 1, topP: 1, topK: 0, seed: b * 7919 + index },
  maxNewTokens: o.newTokens,
  stop: [],
  ignoreEos: true,
});
if (o.workload === 'serve') {
  const model = openModel(modelSpecFlag(o.model, 0));
  const session = await createServingSession(model, { model: modelSpecFlag(o.model, 0), mode: o.mode });
  const ctx = { ...decodeContext(model), session, extraFeeds: {} };
  for (let iteration = 0; iteration < o.iterations; iteration++) {
    const members = ask({ population: o.population, antithetic: true });
    // the calls the training child makes: full mode one member at a time, low-rank and LoRA the population at once
    const calls = o.mode === 'full' ? members.map((m) => [m.index]) : [members.map((m) => m.index)];
    for (const call of calls) {
      const rows = call.flatMap((index) => Array.from({ length: o.batch }, (_, b) => row({ kind: 'base' }, index, b)));
      await decodeBatch(ctx, rows.map((r): PreparedRow => ({ promptIds: r.promptIds!, sampling: r.sampling, maxNewTokens: r.maxNewTokens, stop: r.stop, ignoreEos: r.ignoreEos })));
    }
  }
  await session.release();
  process.stdout.write(`${JSON.stringify({ maxRssKiB: ownPeakKiB() })}\n`);
  process.exit(0);
}
const engine = await openEngine({ model: modelSpecFlag(o.model, 0), mode: o.mode, maxBatch: o.population * o.batch, switchThreads: o.switchThreads, fullModeWeights: o.fullModeWeights, ...(o.prefixCacheBytes !== undefined ? { prefixCacheBytes: o.prefixCacheBytes } : {}), ...(o.lora ? { lora: { ...o.lora, seed: 0 } } : {}) });
const sigma = 0.001;
// GRPO's own state, made before the first step as trainer/studies/grpo/grpo.ts makes it.
const opened = o.workload === 'grpo' ? openModel(modelSpecFlag(o.model, 0)) : null;
const gradient = opened ? new DecoderGradient(opened.config, opened.weights) : null;
const adam = gradient ? new Adam(gradient.weights.map((w) => w.data), 1e-4, o.grpoState) : null;
const reference = gradient && o.grpoKl > 0 ? openModel(modelSpecFlag(o.model, 0)) : null;
let differentiated = 0;
const kl = reference ? { coef: o.grpoKl, reference: new DecoderGradient(reference.config, reference.weights) } : null;
for (let iteration = 0; iteration < o.iterations; iteration++) {
  const members = ask({ population: o.population, antithetic: true });
  if (o.workload === 'train') engine.setPopulation({ runSeed: 1, iteration, sigma, rank: 1, members });
  const select = (index: number): MemberSelector => (o.workload === 'train' ? { kind: 'member', iteration, index } : { kind: 'base' });
  const rewards = new Map<number, number[]>();
  const completions = new Map<number, number[][]>();
  // full mode serves one member at a time; low-rank and LoRA serve the whole population in one batch
  const calls = o.mode === 'full' ? members.map((m) => [m.index]) : [members.map((m) => m.index)];
  for (const call of calls) {
    const rows = call.flatMap((index) => Array.from({ length: o.batch }, (_, b) => ({ index, row: row(select(index), index, b) })));
    const results = await engine.generate(rows.map((r) => r.row));
    rows.forEach((r, k) => {
      rewards.set(r.index, [...(rewards.get(r.index) ?? []), results[k].tokenIds.filter((t) => t % 2 === 0).length]);
      completions.set(r.index, [...(completions.get(r.index) ?? []), results[k].tokenIds]);
    });
  }
  if (gradient && adam) {
    // Every row is one trajectory; stand-in advantages ±1 (group-normalised rewards of a group that alternates
    // between 1 and 0), so every step has a gradient and Adam writes all of its moments.
    const trajectories: Trajectory[] = [];
    for (let b = 0; b < o.batch; b++) {
      const advantages = groupAdvantages(members.map((_, k) => (k % 2 === 0 ? 1 : 0)), 0);
      members.forEach((m, k) => trajectories.push({ turns: [{ promptIds: prompt(b), completionIds: completions.get(m.index)![b]! }], advantage: advantages[k] }));
    }
    const stats = policyGradientStep(gradient, adam, trajectories, 1, kl);
    differentiated += stats.merged;
  }
  if (o.workload === 'train') {
    const { coefficients } = tell(members, rewards, { alpha: 0.01, shaping: 'zscore' });
    await engine.applyUpdate({ runSeed: 1, iteration, coefficients, rank: 1 });
  }
}
await engine.close();
// grpo: the sequences its steps ran forward and backward over (0 would measure GRPO's state without a step)
/**
 * This process's own peak: Linux's VmHWM (the high-water mark of the memory this program mapped after exec).
 * getrusage's maxRSS also counts the parent's resident set at the fork that spawned this child, so a parent
 * holding a model (bench lora) would be reported as the child's peak; it is used only where /proc is not.
 */
function ownPeakKiB(): number {
  try {
    const hwm = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync('/proc/self/status', 'utf8'));
    if (hwm) return Number(hwm[1]);
  } catch {
    // no /proc: fall through
  }
  return process.resourceUsage().maxRSS;
}
process.stdout.write(`${JSON.stringify({ maxRssKiB: ownPeakKiB(), ...(gradient ? { differentiated } : {}) })}\n`);
