/**
 * Spending limits a deployed stack insists on (createCloudApp): every run and every evaluation it queues
 * carries `budget.maxCostUsd`, so a request can never start work whose bill nothing stops. A stack deployed
 * with a stack-wide cap (ESOPT_MAX_RUN_COST_USD / ESOPT_MAX_EVALUATION_COST_USD, docs/CLOUD.md's settings)
 * gives a request without one that cap, and refuses one above it; without a cap, a request without one is
 * refused with 400 at `budget.maxCostUsd`. The local API (`esopt api`) and `esopt train` have no such
 * policy: the caller owns the machine.
 */
import type { FieldIssue } from '../../shared/validation.ts';

export interface CostCaps {
  /** The most a run may spend (USD); unset, each run must name its own `budget.maxCostUsd`. */
  runMaxCostUsd?: number;
  /** The most an evaluation may spend (USD); unset, each evaluation must name its own `budget.maxCostUsd`. */
  evaluationMaxCostUsd?: number;
}

type Budget = { maxCostUsd?: number };

/** `budget` with the stack's cap applied where it names no cost limit, or the issues that refuse it. */
export function cappedBudget<B extends Budget>(budget: B, cap: number | undefined, kind: 'run' | 'evaluation'): { ok: true; budget: B } | { ok: false; issues: FieldIssue[] } {
  const setting = kind === 'run' ? 'ESOPT_MAX_RUN_COST_USD' : 'ESOPT_MAX_EVALUATION_COST_USD';
  const path = 'budget.maxCostUsd';
  if (budget.maxCostUsd === undefined) {
    if (cap !== undefined) return { ok: true, budget: { ...budget, maxCostUsd: cap } };
    return { ok: false, issues: [{ path, message: `is required on a deployed stack: give the ${kind} a spending limit in USD (or deploy the stack with ${setting}, a cap every ${kind} without one gets)` }] };
  }
  if (cap !== undefined && budget.maxCostUsd > cap) {
    return { ok: false, issues: [{ path, message: `is ${budget.maxCostUsd}, above this stack's cap of ${cap} USD per ${kind} (${setting})` }] };
  }
  return { ok: true, budget };
}
