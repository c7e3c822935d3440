/**
 * The short scripted-policy run the run-level tests (targets, LoRA, device noise) train: sudoku 4×4, the
 * tiny preset, 4 members, 3 iterations with a checkpoint at 2, rewards written by the scripted fan-out.
 */
import type { EnvironmentDefinition } from '../../../environments/environment.ts';
import { RunConfig, type RunConfigInput } from '../../../shared/schemas/run-config.ts';
import type { FsObjectStore } from '../../../shared/store/fs.ts';
import type { Engine } from '../../../trainer/engine/engine.ts';
import { train } from '../../../trainer/training/loop/training.ts';
import { scriptedFanout } from './scripted-fanout.ts';

/** The run's config; `over` replaces whole fields (mode, targets, noise, es, …). */
export function scriptedRunConfig(over: Partial<RunConfigInput> = {}): RunConfig {
  return RunConfig.parse({
    environment: { name: 'sudoku', options: { size: 4, blanks: 4 } },
    tasks: { seed: 3, trainPerIteration: 2, evalCount: 1 },
    model: { preset: 'tiny', seed: 2 },
    es: { population: 4, sigma: 0.05, alpha: { schedule: 'cosine', initial: 0.08, final: 0.02 }, weightDecay: 0.1 },
    iterations: 3,
    evalInterval: 10,
    checkpointInterval: 2,
    policy: 'scripted:random',
    workers: 1,
    deadlineMs: 60_000,
    seed: 11,
    ...over,
  });
}

/** One train() call with `engine` as weights and population (resuming whatever `store` holds). */
export function trainScripted(o: {
  store: FsObjectStore;
  config: RunConfig;
  engine: Engine;
  environment: EnvironmentDefinition;
  faults?: Parameters<typeof train>[0]['faults'];
  before?: (iteration: number) => Promise<void>;
}) {
  return train({ run: 'r', config: o.config, store: o.store, fanout: scriptedFanout(o.store, o.before), weights: o.engine, population: o.engine, policy: { baseUrl: 'scripted:random' }, environment: o.environment, pollMs: 10, faults: o.faults });
}

/**
 * Holds `iteration`'s episodes until `open()`: a replica test opens it once the replica serves that
 * iteration, which a fast fan-out could otherwise finish between two of the replica's polls.
 */
export function iterationGate(iteration: number): { before: (k: number) => Promise<void>; open: () => void } {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { before: (k) => (k === iteration ? opened : Promise.resolve()), open };
}
