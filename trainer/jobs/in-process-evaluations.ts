/** The EvaluationLauncher that runs evaluations in this process (the local API, and tests). */
import type { EvaluationLauncher, EvaluationSecrets } from '../../shared/ports/launchers.ts';
import { runEvaluation, type EvaluationRunnerDeps } from './evaluation-runner.ts';

export class InProcessEvaluations implements EvaluationLauncher {
  private readonly running = new Set<Promise<void>>();

  constructor(private readonly deps: EvaluationRunnerDeps) {}

  async start(id: string, secrets: EvaluationSecrets): Promise<void> {
    // runEvaluation records its own failures in the status; nothing here may reject unobserved.
    const job = runEvaluation(this.deps, id, secrets).catch((err) => this.deps.log?.error({ evaluation: id, error: String(err) }, 'evaluation crashed'));
    this.running.add(job);
    void job.finally(() => this.running.delete(job));
  }

  /** Resolves when every evaluation started so far has ended. */
  async settled(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running]);
  }
}
