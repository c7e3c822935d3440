import cliProgress from 'cli-progress';
import { z } from 'zod';
import { Created, EvaluationRequest, EvaluationView } from '../../../shared/schemas/index.ts';
import { formatIssues } from '../../../shared/validation.ts';
import { flag, parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { ENVIRONMENT_KEY_HEADER } from '../../../functions/http-api/environment-key.ts';
import { ApiClient, apiFlags } from '../api-client.ts';
import { jsonFlag } from '../argv/json-flag.ts';
import { UsageError } from '../argv/usage-error.ts';
import { renderEvaluation } from './evals-show.ts';

export const command: Command = {
  name: 'evals start',
  usage: 'esopt evals start --request <json|@file> [--api-key-env VAR] [--environment-key-env VAR] [--wait] [--api URL] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, { ...apiFlags, request: { type: 'string' }, 'api-key-env': { type: 'string' }, 'environment-key-env': { type: 'string' }, wait: { type: 'boolean' } });
    const client = ApiClient.fromFlags(p.values);
    const body = jsonFlag(p.values, 'request') as Record<string, unknown>;
    const keyEnv = flag(p.values, 'api-key-env', z.string().regex(/^[A-Z_][A-Z0-9_]*$/, 'must be an environment variable name').optional());
    if (keyEnv) {
      // The key comes from the environment, so it is in no file and no shell history.
      const key = process.env[keyEnv];
      if (!key) throw new UsageError(`--api-key-env: ${keyEnv} is not set`);
      body.model = { ...(body.model as Record<string, unknown>), apiKey: key };
    }
    const parsed = EvaluationRequest.safeParse(body);
    if (!parsed.success) throw new UsageError(`--request: ${formatIssues(parsed.error)}`);
    // The environment endpoint's key, like the model's: from the environment, sent in its header.
    const environmentKeyEnv = flag(p.values, 'environment-key-env', z.string().regex(/^[A-Z_][A-Z0-9_]*$/, 'must be an environment variable name').optional());
    const environmentKey = environmentKeyEnv === undefined ? undefined : process.env[environmentKeyEnv];
    if (environmentKeyEnv !== undefined && !environmentKey) throw new UsageError(`--environment-key-env: ${environmentKeyEnv} is not set`);
    const { id } = await client.post('/evaluations', body, Created, environmentKey ? { [ENVIRONMENT_KEY_HEADER]: environmentKey } : {});
    if (!p.values.wait) {
      io.stdout(p.json ? JSON.stringify({ id }) : `started evaluation ${id} — see it with: esopt evals show ${id}`);
      return 0;
    }
    const bar = p.json ? null : new cliProgress.SingleBar({ stream: process.stderr, format: `${id} |{bar}| {value}/{total} episodes | {cost}`, noTTYOutput: true, notTTYSchedule: 2000 }, cliProgress.Presets.shades_classic);
    bar?.start(parsed.data.budget.maxEpisodes ?? parsed.data.episodes, 0, { cost: '$0' });
    let view = await client.get(`/evaluations/${id}`, EvaluationView);
    while (view.status.state === 'queued' || view.status.state === 'running') {
      await new Promise((r) => setTimeout(r, 500));
      view = await client.get(`/evaluations/${id}`, EvaluationView);
      bar?.setTotal(Math.max(1, view.status.planned));
      bar?.update(view.episodes.length, { cost: `$${view.summary.totalCostUsd.toFixed(6)}` });
    }
    bar?.stop();
    io.stdout(p.json ? JSON.stringify(view) : renderEvaluation(view));
    return view.status.state === 'failed' ? 1 : 0;
  },
};
