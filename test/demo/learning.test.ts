/**
 * The learning test: a small fixed-seed ES run through the real loop (ONNX engine holding θ, the ES loop
 * with its store and evaluations, sudoku episodes played in-process on the engine — localEpisodes; the
 * worker-pool path plays the same episodes, test/training/in-process-episodes.test.ts — the dense reward,
 * the ES update) must raise held-out
 * success by LEARNING_MARGIN within a few iterations; the same run with the update's sign flipped, and the
 * same run with σ = 0 (every member is θ, so no reward difference to follow; one iteration shows it), must
 * not. The margin is judged on the stored evaluations, not on any verdict the code computes.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { RunConfig } from '../../shared/schemas/index.ts';
import { hashTheta } from '../../shared/theta-hash.ts';
import { loadEnvironment } from '../../environments/index.ts';
import { localSite } from '../../trainer/assembly/local-site.ts';
import { serveModel } from '../../trainer/assembly/run.ts';
import { train, type LivePopulation, type ThetaHolder } from '../../trainer/training/loop/training.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-learning-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Held-out successes (out of evalCount) ES must add; the broken variants must stay below it. */
const LEARNING_MARGIN = 10;

// The 4×4 `next-cell` setting on its committed base (configs/pretrain-sudoku-4x4-demo.json) with the dense
// reward (fraction of blanks right), so every iteration has members to tell apart, and α ≈ 3σ, so one
// update moves θ a good part of the way to its best members: 3 iterations × 16 members × 8 tasks.
const baseConfig = RunConfig.parse({
  environment: { name: 'sudoku', options: { size: 4, blanks: 6, invalidMove: 'waste', observation: 'next-cell', constrainActions: true, shapedReward: true } },
  tasks: { seed: 1, trainPerIteration: 8, evalCount: 32 },
  model: { dir: fileURLToPath(new URL('../../models/sudoku-4x4-demo', import.meta.url)) },
  es: { population: 16, sigma: 0.03, alpha: 0.1, antithetic: true, shaping: 'zscore' },
  generation: { temperature: 0, maxTokens: 12 },
  iterations: 3,
  evalInterval: 3,
  checkpointInterval: 3,
  localEpisodes: 'in-process',
  workers: 128,
  seed: 7,
});

type Variant = 'es' | 'flipped-sign' | 'zero-sigma';

interface Outcome {
  before: number;
  after: number;
  /** θ's hash before and after the run. */
  theta: { before: string; after: string };
}

// With σ = 0 one iteration suffices: every member is θ, so the update is zero and θ after one iteration is
// θ₀ again, which makes every later iteration the same one.
const zeroSigmaConfig = RunConfig.parse({ ...baseConfig, iterations: 1, evalInterval: 1, checkpointInterval: 1 });

async function learn(variant: Variant): Promise<Outcome> {
  const run = `learn-${variant}`;
  const config = variant === 'zero-sigma' ? zeroSigmaConfig : baseConfig;
  const storeRoot = join(root, variant);
  const environment = await loadEnvironment(config.environment.name);
  const { engine, server, close } = await serveModel(config);
  const target = localSite(storeRoot, { workers: config.workers, localEpisodes: config.localEpisodes });
  target.useEngine?.(engine);
  try {
    await target.warm?.();
    const thetaBefore = hashTheta(engine.segments());
    const weights: ThetaHolder =
      variant === 'flipped-sign'
        ? {
            segments: () => engine.segments(),
            commitUpdate: () => engine.commitUpdate(),
            applyUpdate: (u) => engine.applyUpdate({ ...u, coefficients: u.coefficients.map((c) => ({ ...c, coef: -c.coef })) }),
          }
        : engine;
    // σ = 0 where the members are served: the manifest keeps the config's σ, every member plays θ itself.
    const population: LivePopulation = variant === 'zero-sigma' ? { setPopulation: (p) => server.service.setPopulation(p && { ...p, sigma: 0 }) } : server.service;
    const result = await train({ run, config, store: target.store, fanout: target.fanout, weights, population, policy: { baseUrl: `${server.url}/v1` }, environment, pollMs: 20 });
    const at = (k: number) => result.evaluations.find((e) => e.iteration === k)!;
    const solved = (k: number) => at(k).perTask.filter((p) => p.error === null && p.reward >= config.successThreshold).length;
    expect(at(0).tasks).toBe(config.tasks.evalCount);
    return { before: solved(0), after: solved(config.iterations), theta: { before: thetaBefore, after: result.thetaHash } };
  } finally {
    await target.close();
    await close();
  }
}

describe('ES learns, and fails to when learning is broken', () => {
  const outcomes = new Map<Variant, Outcome>();

  it('raises held-out success by the margin within a few iterations', async () => {
    const r = await learn('es');
    outcomes.set('es', r);
    expect(r.after - r.before, JSON.stringify(r)).toBeGreaterThanOrEqual(LEARNING_MARGIN);
  }, 300_000);

  it('with the update\'s sign flipped, does not', async () => {
    const r = await learn('flipped-sign');
    outcomes.set('flipped-sign', r);
    expect(r.after - r.before, JSON.stringify(r)).toBeLessThan(LEARNING_MARGIN);
  }, 300_000);

  it('with σ = 0, does not (and θ is left as it was)', async () => {
    const r = await learn('zero-sigma');
    expect(r.after - r.before, JSON.stringify(r)).toBeLessThan(LEARNING_MARGIN);
    // Every member played θ, so every reward was the same and the update was zero.
    expect(r.theta.after).toBe(r.theta.before);
    // All three started from the same θ₀; the working ones moved it.
    for (const o of outcomes.values()) {
      expect(o.theta.before).toBe(r.theta.before);
      expect(o.theta.after).not.toBe(o.theta.before);
    }
  }, 300_000);
});
