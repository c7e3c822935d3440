/** The parts one ES run works with, as the loop's modules (resume, iteration, evaluations) take them. */
import type { Fanout } from '../../../shared/ports/fanout.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import type { EpisodeInstructions, PolicyEndpoint, RunConfig } from '../../../shared/schemas/index.ts';
import type { EnvironmentDefinition } from '../../../environments/environment.ts';
import type { Engine, Population } from '../../engine/engine.ts';
import type { FaultHook } from './fault-points.ts';
import type { ReplicaSet } from './replica-set.ts';
import type { ThetaHolder } from './restore.ts';
import type { RunTasks } from './run-tasks.ts';

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
  /** Where the run's tasks come from: the environment's generator or its pinned task suite. */
  tasks: RunTasks;
  /** The run's pinned instructions (c_t) with their documents, carried by every episode request; null: none. */
  instructions: EpisodeInstructions | null;
  /** Trainer replicas sharing the members' inference; absent: this process serves them all. */
  replicas?: ReplicaSet;
  pollMs: number;
  faults: FaultHook;
}
