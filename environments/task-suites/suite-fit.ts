/**
 * Whether a pinned suite can serve what a run or an evaluation asks of it: tasks of the request's
 * environment, and at least as many tasks in each split as are drawn from it at once (a sample never
 * cycles: suite sampling refuses a split too small). The API answers these as 400s at the asking field;
 * the trainer checks them again at run start, before anything is played.
 */
import type { FieldIssue } from '../../shared/validation.ts';
import type { Split } from '../environment.ts';
import type { PinnedSuite } from './suite-catalog.ts';

export interface SuiteDemand {
  split: Split;
  count: number;
  /** The request's field that asks for `count` (e.g. `tasks.trainPerIteration`). */
  path: string;
}

/** `refPath`: where the suite is named in the request (e.g. `tasks.suite`). */
export function suiteFitIssues(suite: PinnedSuite, environment: string, demands: readonly SuiteDemand[], refPath: string): FieldIssue[] {
  if (suite.environment !== environment) {
    return [{ path: `${refPath}.name`, message: `task suite ${suite.name} (${suite.manifest.slice(0, 12)}) holds ${suite.environment} tasks; this request's environment is ${environment}` }];
  }
  return demands
    .filter((d) => d.count > suite.splits[d.split])
    .map((d) => ({
      path: d.path,
      message: `is ${d.count}, but task suite ${suite.name} (${suite.manifest.slice(0, 12)}) has ${suite.splits[d.split]} ${d.split} task(s): a task's split is fixed by its content hash, so push more tasks or ask for fewer`,
    }));
}
