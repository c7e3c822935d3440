/** /evaluations: pay-per-episode evaluations of our models or anybody's OpenAI-compatible endpoint. */
import { createRoute, type OpenAPIHono } from '@hono/zod-openapi';
import { z } from 'zod';
import { keys } from '../../shared/keys.ts';
import { Created, EvaluationList, EvaluationRequest, EvaluationView, Id, PageQuery, type EvaluationStatus, type StoredEvaluationRequest } from '../../shared/schemas/index.ts';
import type { FieldIssue } from '../../shared/validation.ts';
import { loadEnvironment } from '../../environments/index.ts';
import { requestChoiceIssues } from './request-choices.ts';
import { cappedBudget } from './cost-caps.ts';
import { pinRequestModel } from './model-pin.ts';
import { pinRequestSuite } from './suite-pin.ts';
import { pinRequestInstructions } from './instructions-pin.ts';
import type { ApiDeps } from './deps.ts';
import { ApiProblem, invalidProblem, issuesOf, notFound } from './errors.ts';
import { StoredTranscript } from '../episode-transcript.ts';
import { EvaluationPlanRecord } from './evaluation-plan.ts';
import { readEpisodes, readEvaluation } from './evaluation-reader.ts';
import { idsUnder, pageOf } from './id-page.ts';
import { newId } from './ids.ts';
import { environmentKeyHeader, errors, idempotencyHeader, json, secured } from './openapi-common.ts';
import { ENVIRONMENT_KEY_HEADER, storeEnvironmentKey } from './environment-key.ts';
import { readConfig } from './run-reader.ts';
import { readJson, writeJson } from '../../shared/store/json.ts';

const tags = ['evaluations'];

/** Environment, options and explicit tasks checked by the environment's own schemas, all issues at once. */
async function environmentIssues(body: EvaluationRequest): Promise<FieldIssue[]> {
  let definition;
  try {
    definition = await loadEnvironment(body.environment.name);
  } catch (err) {
    return [{ path: 'environment.name', message: (err as Error).message }];
  }
  const issues: FieldIssue[] = [];
  const options = definition.optionsSchema.safeParse(body.environment.options);
  if (!options.success) issues.push(...issuesOf(options.error, 'environment.options'));
  if ('tasks' in body.tasks) {
    const seen = new Set<string>();
    body.tasks.tasks.forEach((t, n) => {
      if (seen.has(t.id)) issues.push({ path: `tasks.tasks.${n}.id`, message: `duplicate task id ${JSON.stringify(t.id)}` });
      seen.add(t.id);
      const task = definition.taskSchema.safeParse(t.task);
      if (!task.success) issues.push(...issuesOf(task.error, `tasks.tasks.${n}.task`));
      else if (options.success) {
        const issue = definition.taskIssue?.(task.data, options.data) ?? null;
        if (issue !== null) issues.push({ path: `tasks.tasks.${n}.task`, message: issue });
      }
    });
  }
  return issues;
}

function stored(body: EvaluationRequest): StoredEvaluationRequest {
  const createdAt = new Date().toISOString();
  if (body.model.kind !== 'external') return { ...body, model: body.model, createdAt };
  const { apiKey, ...model } = body.model;
  return { ...body, model: { ...model, hasApiKey: apiKey !== undefined }, createdAt };
}

export function registerEvaluationRoutes(app: OpenAPIHono, deps: ApiDeps): void {
  const { store } = deps;

  app.openapi(
    createRoute({
      method: 'post',
      path: '/evaluations',
      tags,
      security: secured,
      summary: 'Evaluate a model: episodes fan out, priced per episode, stopped by the budget',
      request: { headers: idempotencyHeader.extend(environmentKeyHeader.shape), body: { content: { 'application/json': { schema: EvaluationRequest } }, required: true } },
      responses: { 202: json(Created, 'Accepted; follow it at GET /evaluations/{id}'), 400: errors[400], 401: errors[401], 404: errors[404], 422: errors[422] },
    }),
    async (c) => {
      const asked = c.req.valid('json');
      const issues = [...(await environmentIssues(asked)), ...requestChoiceIssues(asked, deps.deployed)];
      const budget = deps.costCaps ? cappedBudget(asked.budget, deps.costCaps.evaluationMaxCostUsd, 'evaluation') : { ok: true as const, budget: asked.budget };
      if (!budget.ok) issues.push(...budget.issues);
      if (issues.length) throw invalidProblem(issues);
      const capped: EvaluationRequest = budget.ok ? { ...asked, budget: budget.budget } : asked;
      const modelPinned: EvaluationRequest = capped.model.kind === 'base' ? { ...capped, model: { ...capped.model, model: await pinRequestModel(store, capped.model.model, 'model.model') } } : capped;
      const set = modelPinned.tasks;
      const suitePinned: EvaluationRequest =
        'suite' in set ? { ...modelPinned, tasks: { ...set, suite: await pinRequestSuite(store, set.suite, 'tasks.suite', modelPinned.environment.name, [{ split: set.split, count: set.count, path: 'tasks.count' }]) } } : modelPinned;
      const body: EvaluationRequest = suitePinned.instructions ? { ...suitePinned, instructions: await pinRequestInstructions(store, suitePinned.instructions) } : suitePinned;
      if (body.model.kind !== 'external' && !deps.servesOwnModels) {
        throw new ApiProblem(422, 'model_not_servable', `this deployment cannot serve ${body.model.kind} models; evaluate an external endpoint, or use the local API (esopt api)`);
      }
      if (body.model.kind === 'checkpoint') {
        await readConfig(store, body.model.run);
        const iteration = body.model.iteration;
        const metas = (await store.list(keys.checkpoints(body.model.run))).filter((k) => k.endsWith('/meta.json'));
        const found = iteration === undefined ? metas.length > 0 : metas.includes(keys.checkpointMeta(body.model.run, iteration));
        if (!found) throw new ApiProblem(422, 'no_checkpoint', `run ${body.model.run} has no checkpoint${iteration === undefined ? '' : ` at iteration ${iteration}`}`);
      }

      const environmentKey = await storeEnvironmentKey(c.req.header(ENVIRONMENT_KEY_HEADER), body.environment, deps.endpointKeys);
      if (!environmentKey.ok) throw invalidProblem(environmentKey.issues);
      const request = stored({ ...body, environment: { ...body.environment, ...(environmentKey.keyParameter ? { keyParameter: environmentKey.keyParameter } : {}) } });
      let id = newId('eval');
      try {
        while (!(await writeJson(store, keys.evaluationRequest(id), request, true))) id = newId('eval');
      } catch (err) {
        await environmentKey.discard().catch(() => {});
        throw err;
      }
      const now = new Date().toISOString();
      const status: EvaluationStatus = { id, state: 'queued', stopReason: null, planned: 0, dispatched: 0, waves: 0, error: null, updatedAt: now, finishedAt: null };
      await writeJson(store, keys.evaluationStatus(id), status);
      try {
        await deps.evaluations.start(id, body.model.kind === 'external' && body.model.apiKey ? { apiKey: body.model.apiKey } : {});
      } catch (err) {
        await writeJson(store, keys.evaluationStatus(id), { ...status, state: 'failed', error: (err as Error).message.slice(0, 4000), finishedAt: new Date().toISOString() });
        throw err;
      }
      return c.json({ id }, 202);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/evaluations',
      tags,
      security: secured,
      summary: 'List evaluations, a page at a time',
      request: { query: PageQuery },
      responses: { 200: json(EvaluationList, 'A page of evaluations (ids in lexical order, the page newest first), and where the next starts'), 400: errors[400], 401: errors[401] },
    }),
    async (c) => {
      const page = await pageOf(await idsUnder(store, 'evaluations/'), c.req.valid('query'), async (id) => {
        try {
          return await readEvaluation(store, id, deps.prices);
        } catch (err) {
          if (err instanceof ApiProblem && err.status === 404) return null;
          throw err;
        }
      });
      const views = page.items.sort((a, b) => b.request.createdAt.localeCompare(a.request.createdAt));
      return c.json({ evaluations: views.map(({ id, status, request, summary }) => ({ id, status, request, summary })), next: page.next }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/evaluations/{id}',
      tags,
      security: secured,
      summary: 'An evaluation: per-episode records (reward, steps, tokens, duration, cost, transcript) and the summary',
      request: { params: z.object({ id: Id }) },
      responses: { 200: json(EvaluationView, 'The evaluation so far'), 400: errors[400], 401: errors[401], 404: errors[404] },
    }),
    async (c) => c.json(await readEvaluation(store, c.req.valid('param').id, deps.prices), 200),
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/evaluations/{id}/episodes/{index}/transcript',
      tags,
      security: secured,
      summary: "An episode's transcript, as the Episode function stored it (size-bounded; `truncated` says what was cut)",
      request: { params: z.object({ id: Id, index: z.coerce.number().int().min(0) }) },
      responses: { 200: json(StoredTranscript, 'The stored transcript'), 400: errors[400], 401: errors[401], 404: errors[404] },
    }),
    async (c) => {
      const { id, index } = c.req.valid('param');
      const view = await readEvaluation(store, id, deps.prices);
      const plan = await readJson(store, keys.evaluationPlan(id), EvaluationPlanRecord);
      const found = plan ? (await readEpisodes(store, id, view.request, plan, deps.prices)).find((e) => e.episode.index === index) : undefined;
      if (!found) throw notFound('episode', `${id}/${index}`);
      const key = found.record.transcriptKey;
      // Only the evaluation's own objects: a record can never make this route read elsewhere in the store.
      const transcript = key && key.startsWith(keys.run(id)) ? await readJson(store, key, StoredTranscript) : null;
      if (!transcript) throw new ApiProblem(404, 'no_transcript', `episode ${index} of ${id} has no stored transcript`);
      return c.json(transcript, 200);
    },
  );
}
