/**
 * The Api function: a hono app behind `hono/aws-lambda`, served through the function URL sst.config.ts
 * gives it. This file is only the adapter and its wiring; the routes belong to the app factory.
 *
 * Until the API's own app (runs, evaluations, dashboard) has launchers that work on Lambda, the
 * deployed function serves the health route below: what is here is real, and nothing pretends more.
 */
import { Hono } from 'hono';
import { handle, type LambdaEvent } from 'hono/aws-lambda';
import { z } from 'zod';

const ApiFunctionEnv = z.object({
  ESOPT_BUCKET: z.string().min(3),
  AWS_REGION: z.string().min(1).default('us-east-1'),
});

/** The app the deployed function serves today: a health check naming the stack's bucket. */
export function createCloudApiApp(env: z.infer<typeof ApiFunctionEnv>): Hono {
  const app = new Hono();
  app.get('/healthz', (c) => c.json({ ok: true, bucket: env.ESOPT_BUCKET, region: env.AWS_REGION }));
  app.notFound((c) => c.json({ error: { code: 'not_found', message: `no route ${c.req.method} ${c.req.path}` } }, 404));
  return app;
}

/** Wraps any hono app as a Lambda handler (function URL, API Gateway v1/v2 or ALB events). */
export function lambdaHandlerFor(app: Hono): ReturnType<typeof handle> {
  return handle(app);
}

let cached: ReturnType<typeof handle> | undefined;

/** The AWS Lambda entry point (`functions/api.handler` in sst.config.ts). */
export const handler = (event: LambdaEvent, context?: Parameters<ReturnType<typeof handle>>[1]) => {
  cached ??= lambdaHandlerFor(createCloudApiApp(ApiFunctionEnv.parse(process.env)));
  return cached(event, context);
};
