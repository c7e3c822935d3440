/**
 * The ES loop's public face: what entry points, studies, benchmarks, replicas and hosting may use. The rest
 * of loop/ (the iteration's steps, the collector, the record classification) is the loop's own;
 * test/architecture.test.ts refuses imports of it from outside.
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
export * from './weight-update.ts';
export * from './stored-json.ts';
export * from './replica-set.ts';
export * from './coordinator-lease.ts';
export * from './fault-points.ts';
export * from './curve-svg.ts';
export * from './report.ts';
