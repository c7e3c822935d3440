/** The parts one ES run works with, as the loop's modules (resume, iteration, evaluations) take them. */
import type { Fanout } from '../../../shared/ports/fanout.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import type { PolicyEndpoint, RunConfig, TaskRef } from '../../../shared/schemas/index.ts';
import type { EnvironmentDefinition, Split } from '../../../environments/environment.ts';
import type { Engine, Population } from '../../engine/engine.ts';
import type { FaultHook } from './fault-points.ts';
import type { ReplicaSet } from './replica-set.ts';
import type { ThetaHolder } from './restore.ts';

/** Whatever serves members (the inference service): told which population is live. */
export interface LivePopulation {
  setPopulation(p: Population | null): void;
}

export interface LoopContext {
  run: string;
  config: RunConfig;
  store: ObjectStore;
  fanout: Fanout;
  /**
   * θ, and (where it can say) which of its tensors the run's targets name, checked at run start; without
   * `targetTensors` a bad pattern fails at the first population or update instead.
   */
  weights: ThetaHolder & Partial<Pick<Engine, 'targetTensors'>>;
  population: LivePopulation;
  /** Where episodes reach their policy (the inference server); `model` is filled in per member. */
  policy: Omit<PolicyEndpoint, 'model'>;
  environment: EnvironmentDefinition;
  /** The run config's environment options, parsed by the environment's own schema. */
  environmentOptions: unknown;
  /** Trainer replicas sharing the members' inference; absent: this process serves them all. */
  replicas?: ReplicaSet;
  pollMs: number;
  faults: FaultHook;
}

/** The run's tasks of one split as the manifest and the requests carry them. */
export function sampleTaskRefs(ctx: Pick<LoopContext, 'environment' | 'environmentOptions'>, split: Split, n: number, seed: number): TaskRef[] {
  return ctx.environment.sampleTasks(split, n, seed, ctx.environmentOptions).map((t) => ({ id: t.id, task: t.task }));
}
