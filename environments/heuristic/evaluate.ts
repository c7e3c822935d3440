/**
 * Scores one submission: runs the agent's code in a fresh sandbox on every test instance and
 * normalises its cost against the problem's baseline. Any failure is a score of 0 with its reason.
 */
import { Sandbox, SandboxError, type SandboxLimits } from './sandbox.ts';
import { WrongReturnError, type HeuristicProblem, type InstanceResult } from './problem.ts';

export type Evaluation =
  | { ok: true; score: number; results: InstanceResult[]; elapsedMs: number }
  | { ok: false; score: 0; kind: SandboxError['kind']; reason: string; elapsedMs: number };

export async function evaluateSubmission<Instance>(
  problem: HeuristicProblem<Instance>,
  instances: Instance[],
  code: string,
  limits: SandboxLimits,
): Promise<Evaluation> {
  const started = performance.now();
  let sandbox: Sandbox | undefined;
  try {
    sandbox = await Sandbox.create(code, problem.functionName, limits);
    const box = sandbox;
    const results: InstanceResult[] = [];
    for (const instance of instances) results.push(await problem.solve(instance, (args) => box.call(args)));
    // Mean of baseline/cost: 1 is the baseline's quality, higher is better.
    const score = results.reduce((s, r) => s + r.baselineCost / r.cost, 0) / results.length;
    return { ok: true, score, results, elapsedMs: performance.now() - started };
  } catch (err) {
    const elapsedMs = performance.now() - started;
    if (err instanceof SandboxError) return { ok: false, score: 0, kind: err.kind, reason: err.message, elapsedMs };
    if (err instanceof WrongReturnError) return { ok: false, score: 0, kind: 'return-type', reason: err.message, elapsedMs };
    throw err;
  } finally {
    sandbox?.dispose();
  }
}
