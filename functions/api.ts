/**
 * The Api function: the esopt HTTP API (functions/api-app/app.ts) behind `hono/aws-lambda`, served
 * through the function URL sst.config.ts gives it, over the runs bucket.
 *
 * What it serves on Lambda is what a stateless function can do: every read (runs, metrics,
 * checkpoints, evaluations, events, the dashboard) straight from the bucket. Starting a run or an
 * evaluation needs the trainer box, and nothing on the box polls the bucket for requests yet, so
 * those are refused with a clear 409 instead of being queued where nobody would pick them up.
 */
import { handle, type LambdaEvent } from 'hono/aws-lambda';
import type { Env, Hono, Schema } from 'hono';
import { pino } from 'pino';
import { z } from 'zod';
import { CostPrices } from '../shared/cost.ts';
import type { EvaluationLauncher, RunLauncher } from '../shared/ports/launchers.ts';
import type { ObjectStore } from '../shared/ports/object-store.ts';
import { S3ObjectStore } from '../shared/store/s3.ts';
import { createApiApp } from './api-app/app.ts';
import { ApiProblem } from './api-app/errors.ts';

export const ApiFunctionEnv = z.object({
  ESOPT_BUCKET: z.string().min(3),
  /** The bearer token of every non-public route. */
  ESOPT_TOKEN: z.string().min(1),
  AWS_REGION: z.string().min(1).default('us-east-1'),
  ESOPT_COST_PRICES: z.string().optional(),
});

const NEEDS_TRAINER = 'this deployment serves reads only: start runs and evaluations with `esopt api` on the trainer box';

/** Launchers for a function that cannot train: the request is refused, and the API marks it failed with why. */
export const readOnlyLaunchers: { runs: RunLauncher; evaluations: EvaluationLauncher } = {
  runs: {
    start: async () => {
      throw new ApiProblem(409, 'needs_trainer', NEEDS_TRAINER);
    },
    // The stop request is in the bucket already; a trainer running the run reads it there.
    stop: async () => {},
  },
  evaluations: {
    start: async () => {
      throw new ApiProblem(409, 'needs_trainer', NEEDS_TRAINER);
    },
  },
};

export function createCloudApiApp(options: { store: ObjectStore; token: string; prices?: z.input<typeof CostPrices> }): ReturnType<typeof createApiApp> {
  return createApiApp({
    store: options.store,
    token: options.token,
    ...readOnlyLaunchers,
    servesOwnModels: false,
    prices: CostPrices.parse(options.prices ?? {}),
    log: pino({ name: 'esopt-api' }),
    eventPollMs: 1000,
  });
}

/** Wraps any hono app as a Lambda handler (function URL, API Gateway v1/v2 or ALB events). */
export function lambdaHandlerFor<E extends Env, S extends Schema, B extends string>(app: Hono<E, S, B>) {
  return handle(app);
}

let cached: ReturnType<typeof lambdaHandlerFor> | undefined;

/** The AWS Lambda entry point (`functions/api.handler` in sst.config.ts). */
export const handler = (event: LambdaEvent, context?: Parameters<ReturnType<typeof lambdaHandlerFor>>[1]) => {
  if (!cached) {
    const env = ApiFunctionEnv.parse(process.env);
    cached = lambdaHandlerFor(
      createCloudApiApp({
        store: new S3ObjectStore({ bucket: env.ESOPT_BUCKET, region: env.AWS_REGION }),
        token: env.ESOPT_TOKEN,
        prices: env.ESOPT_COST_PRICES ? JSON.parse(env.ESOPT_COST_PRICES) : undefined,
      }),
    );
  }
  return cached(event, context);
};
