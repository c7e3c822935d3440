/**
 * A policy named on the command line: `oracle`, `random`, `replay:FILE` or `http:URL` (URL up to the
 * API version, e.g. http:http://127.0.0.1:8080/v1).
 */
import type { Policy } from '../../shared/ports/policy.ts';
import type { EnvironmentDefinition } from '../environment.ts';
import { HttpPolicy, type HttpPolicyOptions } from './http-client.ts';
import { loadReplay } from './replay.ts';

export type PolicySpec = { kind: 'oracle' } | { kind: 'random' } | { kind: 'replay'; file: string } | { kind: 'http'; url: string };

export function parsePolicySpec(text: string): PolicySpec {
  if (text === 'oracle' || text === 'random') return { kind: text };
  if (text.startsWith('replay:') && text.length > 'replay:'.length) return { kind: 'replay', file: text.slice('replay:'.length) };
  if (text.startsWith('http:') && /^https?:\/\//.test(text.slice('http:'.length))) return { kind: 'http', url: text.slice('http:'.length) };
  throw new Error(`policy must be oracle, random, replay:FILE or http:URL (with URL starting http:// or https://), got ${JSON.stringify(text)}`);
}

export interface PolicyInputs<Task, Options> {
  definition: EnvironmentDefinition<Task, Options>;
  task: Task;
  options: Options;
  seed: number;
  /** Everything but the URL, for `http:` policies. */
  http?: Omit<HttpPolicyOptions, 'baseUrl'>;
}

export async function makePolicy<Task, Options>(spec: PolicySpec, inputs: PolicyInputs<Task, Options>): Promise<Policy> {
  switch (spec.kind) {
    case 'oracle':
      return inputs.definition.oracle(inputs.task, inputs.options);
    case 'random':
      return inputs.definition.random(inputs.task, inputs.options, inputs.seed);
    case 'replay':
      return loadReplay(spec.file);
    case 'http':
      return new HttpPolicy({ model: 'base', seed: inputs.seed, ...inputs.http, baseUrl: spec.url });
  }
}
