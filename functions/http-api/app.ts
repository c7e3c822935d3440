/**
 * The esopt HTTP API as one hono app over ports (ObjectStore, RunLauncher, EvaluationLauncher), so the
 * same app serves `esopt api` in-process and runs on Lambda (functions/api.ts). The zod schemas of
 * shared/schemas/http-api.ts validate the bodies, type the handlers and make the OpenAPI document.
 */
import { OpenAPIHono } from '@hono/zod-openapi';
import { HTTPException } from 'hono/http-exception';
import type { ApiDeps } from './deps.ts';
import { bearerAuth } from './auth.ts';
import { rateLimit } from './rate-limit.ts';
import { registerBoxRoutes } from './boxes-routes.ts';
import { DASHBOARD_PATHS, registerDashboard } from './dashboard-routes.ts';
import { DOCS_PATHS, registerDocs } from './docs-routes.ts';
import { ApiProblem, fail, invalid, issuesOf } from './errors.ts';
import { registerEvaluationRoutes } from './evaluations-routes.ts';
import { idempotency } from './idempotency.ts';
import { requestLog } from './request-log.ts';
import { registerModelExportRoutes } from './model-export-routes.ts';
import { registerRunRoutes } from './runs-routes.ts';

export type { ApiDeps } from './deps.ts';

const PUBLIC = new Set(['/healthz', '/openapi.json', ...DOCS_PATHS, ...DASHBOARD_PATHS]);

export function createApiApp(deps: ApiDeps): OpenAPIHono {
  const app = new OpenAPIHono({
    defaultHook: (result, c) => {
      if (!result.success) return invalid(c, issuesOf(result.error));
    },
  });

  app.use('*', requestLog(deps.log));
  app.use('*', bearerAuth(deps.token, (path) => PUBLIC.has(path)));
  if (deps.rateLimit) app.use('*', rateLimit(deps.rateLimit));
  app.use('*', idempotency(deps.store));

  app.get('/healthz', (c) => c.json({ ok: true }));
  app.openAPIRegistry.registerComponent('securitySchemes', 'bearer', { type: 'http', scheme: 'bearer', description: 'ESOPT_TOKEN' });
  registerRunRoutes(app, deps);
  registerModelExportRoutes(app, deps);
  registerEvaluationRoutes(app, deps);
  registerBoxRoutes(app, deps);
  app.doc31('/openapi.json', {
    openapi: '3.1.0',
    info: { title: 'esopt API', version: '0.1.0', description: 'Training runs, pay-per-episode evaluations and the dashboard. See docs/API.md.' },
  });
  registerDocs(app);
  registerDashboard(app);

  app.notFound((c) => fail(c, 404, 'not_found', `no route ${c.req.method} ${c.req.path}`));
  app.onError((err, c) => {
    if (err instanceof ApiProblem) return fail(c, err.status, err.code, err.message, err.issues);
    if (err instanceof HTTPException && err.status === 400) return fail(c, 400, 'invalid_json', err.message || 'the body is not valid JSON', [{ path: '(body)', message: err.message }]);
    if (err instanceof HTTPException) return fail(c, err.status, 'http_error', err.message);
    deps.log.error({ path: c.req.path, error: err instanceof Error ? err.message : String(err) }, 'unhandled error');
    return fail(c, 500, 'internal', 'internal error; see the server log');
  });
  return app;
}
