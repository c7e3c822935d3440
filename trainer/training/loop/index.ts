/**
 * The ES loop's public face. `train` (an ES run) is called by the composition root only
 * (trainer/assembly/run.ts: `runEmbedded`), through which `esopt train`, the local API, the box, the studies
 * and the benchmarks all run; the rest — reward collection, checkpoints and restore, the report, the
 * coordinator lease — is for any room above (random search collects rewards as the loop does, exports replay
 * checkpoints, replicas restore θ). The loop's own steps stay inside loop/. docs/architecture.json states
 * both rules (`builders`, `forbidden`); test/architecture.test.ts holds the code to them.
 */
export * from './training.ts';
export * from './progress.ts';
export * from './evaluation.ts';
export * from './task-seed.ts';
export { collectRewards, type CollectOptions } from './collect.ts';
export { RewardCollector, type CollectedRewards } from './reward-collector.ts';
export * from './checkpoints.ts';
export * from './restore.ts';
export * from './resume.ts';
export { pinRunSuite } from './run-tasks.ts';
export { pinRunInstructions } from './run-instructions.ts';
export * from './weight-update.ts';
export * from './replica-set.ts';
export * from './coordinator-lease.ts';
export * from './fault-points.ts';
export * from './curve-svg.ts';
export * from './report.ts';
