/** /runs: start a run (RunConfig), list and inspect runs, stop one, resume one, follow its events. */
import { createRoute, type OpenAPIHono } from '@hono/zod-openapi';
import { streamSSE } from 'hono/streaming';
import { z } from 'zod';
import { keys } from '../../shared/keys.ts';
import { RunExtension } from '../../shared/run-extension.ts';
import { CheckpointList, Created, IdParam, MetricsSeries, ResumeAccepted, RunConfig, RunDetail, PageQuery, RunList, type RunStatus, StopAccepted } from '../../shared/schemas/index.ts';
import { loadEnvironment } from '../../environments/index.ts';
import { requestChoiceIssues } from './request-choices.ts';
import { cappedBudget } from './cost-caps.ts';
import { pinRequestModel } from './model-pin.ts';
import { pinRequestSuite } from './suite-pin.ts';
import { pinRequestOptions } from './options-pin.ts';
import { pinRequestInstructions } from './instructions-pin.ts';
import type { ApiDeps } from './deps.ts';
import { idsUnder, pageOf } from './id-page.ts';
import { ApiProblem, invalidProblem, issuesOf } from './errors.ts';
import { newId } from './ids.ts';
import { environmentKeyHeader, errors, idempotencyHeader, json, secured } from './openapi-common.ts';
import { ENVIRONMENT_KEY_HEADER, storeEnvironmentKey } from './environment-key.ts';
import { advanceCursor, formatEventId, parseEventId, runEvents } from './run-events.ts';
import { readCheckpoints, readConfig, readMetricsSeries, readRunDetail, readRunSummary, readStatus } from './run-reader.ts';
import { readyResume } from './run-resume.ts';
import { writeJson } from '../../shared/store/json.ts';

const tags = ['runs'];
const FINAL = new Set(['finished', 'stopped', 'failed']);

export function registerRunRoutes(app: OpenAPIHono, deps: ApiDeps): void {
  const { store } = deps;

  app.openapi(
    createRoute({
      method: 'post',
      path: '/runs',
      tags,
      security: secured,
      summary: 'Start a training run',
      request: { headers: idempotencyHeader.extend(environmentKeyHeader.shape), body: { content: { 'application/json': { schema: RunConfig } }, required: true } },
      responses: { 201: json(Created, 'The run was created and handed to the launcher'), 400: errors[400], 401: errors[401], 409: errors[409], 422: errors[422] },
    }),
    async (c) => {
      const request = c.req.valid('json');
      let definition;
      try {
        definition = await loadEnvironment(request.environment.name);
      } catch (err) {
        throw invalidProblem([{ path: 'environment.name', message: (err as Error).message }]);
      }
      const options = definition.optionsSchema.safeParse(request.environment.options);
      if (!options.success) throw invalidProblem(issuesOf(options.error, 'environment.options'));
      const refused = requestChoiceIssues(request, deps.deployed);
      const budget = deps.costCaps ? cappedBudget(request.budget, deps.costCaps.runMaxCostUsd, 'run') : { ok: true as const, budget: request.budget };
      if (!budget.ok) refused.push(...budget.issues);
      if (refused.length) throw invalidProblem(refused);
      const model = await pinRequestModel(store, request.model, 'model');
      const { trainPerIteration, evalCount, evalSplit, suite } = request.tasks;
      const tasks = suite
        ? {
            ...request.tasks,
            suite: await pinRequestSuite(store, suite, 'tasks.suite', request.environment.name, [
              { split: 'train', count: trainPerIteration, path: 'tasks.trainPerIteration' },
              { split: evalSplit, count: evalCount, path: 'tasks.evalCount' },
            ]),
          }
        : request.tasks;
      const instructions = request.instructions ? { instructions: await pinRequestInstructions(store, request.instructions) } : {};
      const pinnedOptions = await pinRequestOptions(definition, request.environment.options, store);
      const environmentKey = await storeEnvironmentKey(c.req.header(ENVIRONMENT_KEY_HEADER), request.environment, deps.endpointKeys);
      if (!environmentKey.ok) throw invalidProblem(environmentKey.issues);
      const environment = { ...request.environment, ...(environmentKey.keyParameter ? { keyParameter: environmentKey.keyParameter } : {}), options: pinnedOptions as Record<string, unknown> | undefined };
      const config = { ...request, environment, budget: budget.ok ? budget.budget : request.budget, model, tasks, ...instructions };

      let id = newId(config.name ?? 'run');
      try {
        while (!(await writeJson(store, keys.config(id), config, true))) id = newId(config.name ?? 'run');
      } catch (err) {
        // Nothing names the key: it would only wait for its expiry.
        await environmentKey.discard().catch(() => {});
        throw err;
      }
      const now = new Date().toISOString();
      const status: RunStatus = { run: id, state: 'requested', requestedAt: now, startedAt: null, finishedAt: null, error: null, updatedAt: now };
      await writeJson(store, keys.runStatus(id), status);
      try {
        await deps.runs.start(id);
      } catch (err) {
        const message = (err as Error).message.slice(0, 4000);
        await writeJson(store, keys.runStatus(id), { ...status, state: 'failed', error: message, finishedAt: new Date().toISOString(), updatedAt: new Date().toISOString() });
        throw err;
      }
      return c.json({ id }, 201);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/runs',
      tags,
      security: secured,
      summary: 'List runs, a page at a time',
      request: { query: PageQuery },
      responses: { 200: json(RunList, 'A page of runs (ids in lexical order, the page newest first), and where the next starts'), 400: errors[400], 401: errors[401] },
    }),
    async (c) => {
      // An evaluation's records share `runs/`: an id without a config is not a run.
      const page = await pageOf(await idsUnder(store, 'runs/'), c.req.valid('query'), async (id) => {
        try {
          return await readRunSummary(store, id);
        } catch (err) {
          if (err instanceof ApiProblem && err.status === 404) return null;
          throw err;
        }
      });
      const runs = page.items.sort((a, b) => (b.requestedAt ?? '').localeCompare(a.requestedAt ?? '') || a.id.localeCompare(b.id));
      return c.json({ runs, next: page.next }, 200);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/runs/{id}',
      tags,
      security: secured,
      summary: 'A run: status, iteration, latest metrics, config',
      request: { params: IdParam },
      responses: { 200: json(RunDetail, 'The run'), 400: errors[400], 401: errors[401], 404: errors[404] },
    }),
    async (c) => c.json(await readRunDetail(store, c.req.valid('param').id), 200),
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/runs/{id}/stop',
      tags,
      security: secured,
      summary: 'Stop a run after its current iteration',
      request: { params: IdParam, headers: idempotencyHeader },
      responses: { 202: json(StopAccepted, 'The stop request is recorded; the loop stops at the end of the iteration'), 400: errors[400], 401: errors[401], 404: errors[404], 409: errors[409] },
    }),
    async (c) => {
      const { id } = c.req.valid('param');
      await readConfig(store, id);
      const status = await readStatus(store, id);
      if (status && FINAL.has(status.state)) throw new ApiProblem(409, 'run_over', `run ${id} is ${status.state} already`);
      await writeJson(store, keys.stopRequest(id), { run: id, requestedAt: new Date().toISOString() }, true);
      let state = status?.state ?? 'running';
      if (status && (status.state === 'running' || status.state === 'requested')) {
        state = 'stopping';
        await writeJson(store, keys.runStatus(id), { ...status, state, updatedAt: new Date().toISOString() });
      }
      await deps.runs.stop(id);
      return c.json({ id, state, stopRequested: true as const }, 202);
    },
  );

  app.openapi(
    createRoute({
      method: 'post',
      path: '/runs/{id}/resume',
      tags,
      security: secured,
      summary: 'Go on with a run that ended, with more iterations or a larger budget',
      description:
        'For a run that is stopped (at its budget or on request), failed or finished, or one still under way whose trainer box is gone (on the stack: no queue entry and no claimant that may be alive; it is queued afresh). The body (optional) replaces `iterations` (the length in all, not added) and any of the `budget` limits (null lifts one); the config is re-validated and stored, and the run handed to the launcher, which goes on from its checkpoint and log: θ continues exactly.',
      request: { params: IdParam, headers: idempotencyHeader, body: { content: { 'application/json': { schema: RunExtension } }, required: false } },
      responses: { 202: json(ResumeAccepted, 'The config is updated and the run handed to the launcher'), 400: errors[400], 401: errors[401], 404: errors[404], 409: errors[409], 422: errors[422] },
    }),
    async (c) => {
      const { id } = c.req.valid('param');
      const readied = await readyResume(store, id, c.req.valid('json'), deps.costCaps, deps.runs);
      try {
        await deps.runs.start(id);
      } catch (err) {
        const now = new Date().toISOString();
        await writeJson(store, keys.runStatus(id), { ...readied.status, state: 'failed', error: (err as Error).message.slice(0, 4000), finishedAt: now, updatedAt: now });
        throw err;
      }
      const { config, completed, changes } = readied;
      const state = (await readStatus(store, id))?.state ?? readied.status.state;
      return c.json({ id, state, completedIterations: completed, iterations: config.iterations, budget: config.budget, changes }, 202);
    },
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/runs/{id}/metrics',
      tags,
      security: secured,
      summary: 'The metrics series: one row per iteration, and the evaluations',
      request: { params: IdParam },
      responses: { 200: json(MetricsSeries, 'Rows in iteration order'), 400: errors[400], 401: errors[401], 404: errors[404] },
    }),
    async (c) => c.json(await readMetricsSeries(store, c.req.valid('param').id), 200),
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/runs/{id}/checkpoints',
      tags,
      security: secured,
      summary: "The run's checkpoints",
      request: { params: IdParam },
      responses: { 200: json(CheckpointList, 'Checkpoint metadata in iteration order'), 400: errors[400], 401: errors[401], 404: errors[404] },
    }),
    async (c) => c.json(await readCheckpoints(store, c.req.valid('param').id), 200),
  );

  app.openapi(
    createRoute({
      method: 'get',
      path: '/runs/{id}/events',
      tags,
      security: secured,
      summary: 'Server-sent events: status, iteration started, rewards arriving, update applied, evaluation, end',
      description:
        'Each event\'s `event:` is its `type`, its `data:` a RunEvent as JSON, its `id:` a cursor. A new stream replays the run so far, then follows it live, and closes after `end`. Reconnect with `Last-Event-ID` to get only what follows; on Lambda a stream ends after a window (`retry:` says when to come back).',
      request: { params: IdParam },
      responses: { 200: { content: { 'text/event-stream': { schema: z.string() } }, description: 'An SSE stream of RunEvent' }, 400: errors[400], 401: errors[401], 404: errors[404] },
    }),
    async (c) => {
      const { id } = c.req.valid('param');
      await readConfig(store, id);
      let cursor = parseEventId(c.req.header('last-event-id'));
      return streamSSE(c, async (stream) => {
        const controller = new AbortController();
        stream.onAbort(() => controller.abort());
        // Where a response may only last so long (API Gateway, a buffered Lambda), end the stream in time
        // and let the client come back with Last-Event-ID; `retry` tells EventSource how soon.
        const window = deps.eventWindowMs === undefined ? undefined : setTimeout(() => controller.abort(), deps.eventWindowMs);
        try {
          for await (const event of runEvents(store, id, { pollMs: deps.eventPollMs, signal: controller.signal, after: cursor })) {
            cursor = advanceCursor(cursor, event);
            await stream.writeSSE({ event: event.type, data: JSON.stringify(event), id: formatEventId(cursor), ...(window ? { retry: 1000 } : {}) });
          }
        } finally {
          clearTimeout(window);
        }
      });
    },
  );
}
