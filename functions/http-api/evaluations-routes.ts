/** /evaluations: pay-per-episode evaluations of our models or anybody's OpenAI-compatible endpoint. */
import { createRoute, type OpenAPIHono } from '@hono/zod-openapi';
import { z } from 'zod';
import { keys } from '../../shared/keys.ts';
import { Created, EpisodeReplay, EvaluationComparison, EvaluationList, EvaluationRequest, EvaluationResultFile, EvaluationView, Id, PageQuery, type EvaluationStatus, type StoredEvaluationRequest } from '../../shared/schemas/index.ts';
import { compareEvaluations } from '../../shared/evaluation-comparison.ts';
import type { FieldIssue } from '../../shared/validation.ts';
import { loadEnvironment } from '../../environments/index.ts';
import { requestChoiceIssues } from './request-choices.ts';
import { cappedBudget } from './cost-caps.ts';
import { pinRequestModel } from './model-pin.ts';
import { pinRequestSuite } from './suite-pin.ts';
import { pinRequestOptions } from './options-pin.ts';
import { pinRequestInstructions } from './instructions-pin.ts';
import type { ApiDeps } from './deps.ts';
import { ApiProblem, invalidProblem, issuesOf, notFound } from './errors.ts';
import { StoredTranscript } from '../episode-transcript.ts';
import { readEvaluation } from './evaluation-reader.ts';
import { readEpisodeTranscript, readFrame, readReplay } from './episode-replay.ts';
import { readResultFile } from './evaluation-result-file.ts';
import { idsUnder, pageOf } from './id-page.ts';
import { newId } from './ids.ts';
import { environmentKeyHeader, errors, idempotencyHeader, json, secured } from './openapi-common.ts';
import { ENVIRONMENT_KEY_HEADER, storeEnvironmentKey } from './environment-key.ts';
import { readConfig } from './run-reader.ts';
import { writeJson } from '../../shared/store/json.ts';

const tags = ['evaluations'];

/** The most evaluations one comparison takes: each is read whole from the store. */
export const MAX_COMPARED = 20;

const EpisodeParams = z.object({ id: Id, index: z.coerce.number().int().min(0) });

/** `?ids=a,b,c`: issues name the id's place (`ids.2`). */
const CompareQuery = z.object({
  ids: z
    .string()
    .transform((s) => s.split(',').map((x) => x.trim()))
    .pipe(z.array(Id).min(2).max(MAX_COMPARED))
    .meta({ description: `2 to ${MAX_COMPARED} evaluation ids, comma-separated`, example: 'eval-a,eval-b' }),
});

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
  registerCompareRoute(app, deps);

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
      const instructionsPinned: EvaluationRequest = suitePinned.instructions ? { ...suitePinned, instructions: await pinRequestInstructions(store, suitePinned.instructions) } : suitePinned;
      const options = await pinRequestOptions(await loadEnvironment(asked.environment.name), instructionsPinned.environment.options, store);
      const body: EvaluationRequest = { ...instructionsPinned, environment: { ...instructionsPinned.environment, options: options as EvaluationRequest['environment']['options'] } };
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
      request: { params: EpisodeParams },
      responses: { 200: json(StoredTranscript, 'The stored transcript'), 400: errors[400], 401: errors[401], 404: errors[404] },
    }),
    async (c) => {
      const { id, index } = c.req.valid('param');
      return c.json((await readEpisodeTranscript(store, id, index, deps.prices)).transcript, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/evaluations/{id}/episodes/{index}',
      tags,
      security: secured,
      summary: 'An episode step by step, for a replay: each state\'s observation, screenshot route, the error its action met, and the action taken',
      request: { params: EpisodeParams },
      responses: { 200: json(EpisodeReplay, 'The episode, step by step'), 400: errors[400], 401: errors[401], 404: errors[404] },
    }),
    async (c) => {
      const { id, index } = c.req.valid('param');
      return c.json(await readReplay(store, id, index, deps.prices), 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/evaluations/{id}/episodes/{index}/frames/{step}',
      tags,
      security: secured,
      summary: "One step's screenshot (PNG, as the environment drew it; step 0: after reset)",
      request: { params: EpisodeParams.extend({ step: z.coerce.number().int().min(0).max(99_999) }) },
      responses: {
        200: { content: { 'image/png': { schema: z.string().meta({ format: 'binary' }) } }, description: 'The PNG' },
        400: errors[400],
        401: errors[401],
        404: errors[404],
      },
    }),
    async (c) => {
      const { id, index, step } = c.req.valid('param');
      const png = await readFrame(store, id, index, step, deps.prices);
      // Create-only objects never change: the browser may keep them; `private`, as they sit behind the token.
      return c.body(png as Uint8Array<ArrayBuffer>, 200, { 'Content-Type': 'image/png', 'Cache-Control': 'private, max-age=86400, immutable', 'X-Content-Type-Options': 'nosniff' });
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/evaluations/{id}/result',
      tags,
      security: secured,
      summary: "The evaluation's result file: suite and its content hash, judge version, every task's outcome (a stable, versioned format)",
      request: { params: z.object({ id: Id }) },
      responses: { 200: json(EvaluationResultFile, 'The result file'), 400: errors[400], 401: errors[401], 404: errors[404], 409: errors[409] },
    }),
    async (c) => c.json(await readResultFile(store, c.req.valid('param').id, deps.prices), 200),
  );
}

/**
 * `GET /evaluations/compare`: registered before `GET /evaluations/{id}`, whose path would otherwise take
 * "compare" for an id.
 */
function registerCompareRoute(app: OpenAPIHono, deps: ApiDeps): void {
  app.openapi(
    createRoute({
      method: 'get',
      path: '/evaluations/compare',
      tags,
      security: secured,
      summary: 'Several evaluations of the same tasks and judge: success (95% interval) against cost per episode, the Pareto frontier marked',
      request: { query: CompareQuery },
      responses: { 200: json(EvaluationComparison, 'The comparison'), 400: errors[400], 401: errors[401], 404: errors[404], 409: errors[409] },
    }),
    async (c) => {
      const { ids } = c.req.valid('query');
      const files = await Promise.all(ids.map((id) => readResultFile(deps.store, id, deps.prices)));
      const outcome = compareEvaluations(files, 'ids');
      if (!outcome.ok) throw invalidProblem(outcome.issues);
      return c.json(outcome.comparison, 200);
    },
  );
}
