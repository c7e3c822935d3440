/**
 * What an API request may not choose. On a deployed stack no request names a program to run or a path on
 * a machine's disk: the Episode function would launch a web option's `executablePath` with its role's
 * credentials in its environment, and the trainer box would open a model `dir` wherever it points (the
 * models/ directories the tree ships included: a model reaches the stack by `esopt models push`, and is
 * named as `{ name }`). And anywhere, an endpoint key only travels over https (a loopback address
 * excepted: it never leaves the host).
 */
import type { EvaluationModel, ModelSpec } from '../../shared/schemas/index.ts';
import type { FieldIssue } from '../../shared/validation.ts';

/** The environment options that name a program or a path, per environment. */
const HOST_OPTIONS: Record<string, string[]> = { web: ['executablePath'] };

const LOOPBACK = /^(localhost|127(\.\d{1,3}){3}|\[::1\])$/i;

export function isLoopbackUrl(url: string): boolean {
  return LOOPBACK.test(new URL(url).hostname);
}

export interface RequestChoiceInput {
  environment: { name: string; options?: unknown };
  /** A run's model (at `model`), or an evaluation's (a base model's spec at `model.model`). */
  model?: ModelSpec | EvaluationModel;
}

/** The issues of a request on a deployed stack (`deployed`), or anywhere; none when it may go ahead. */
export function requestChoiceIssues(input: RequestChoiceInput, deployed: boolean): FieldIssue[] {
  const issues: FieldIssue[] = [];
  if (deployed) {
    const options = (input.environment.options ?? {}) as Record<string, unknown>;
    for (const name of HOST_OPTIONS[input.environment.name] ?? []) {
      if (options[name] !== undefined) issues.push({ path: `environment.options.${name}`, message: 'a deployed stack chooses its own programs: a request may not name one (leave it out)' });
    }
    const spec = input.model && 'kind' in input.model ? (input.model.kind === 'base' ? { path: 'model.model', model: input.model.model } : null) : input.model ? { path: 'model', model: input.model } : null;
    if (spec && 'dir' in spec.model) {
      issues.push({ path: `${spec.path}.dir`, message: "a deployed stack opens no path on the trainer box's disk: push the model (esopt models push DIR --cloud) and name it as { \"name\": ... }, or name a preset" });
    }
  }
  const model = input.model;
  if (model && 'kind' in model && model.kind === 'external' && model.apiKey !== undefined && new URL(model.baseUrl).protocol !== 'https:' && !isLoopbackUrl(model.baseUrl)) {
    issues.push({ path: 'model.baseUrl', message: 'an endpoint with an API key must be https, so the key does not travel in clear text' });
  }
  return issues;
}
