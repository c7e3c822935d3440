/**
 * The Api function: the esopt HTTP API as the Api Lambda builds it (functions/http-api/cloud-app.ts:
 * the runs bucket, ESOPT_TOKEN, work queued in the bucket for the trainer box) behind
 * `hono/aws-lambda`, served through the function URL sst.config.ts gives it.
 *
 * Reads (runs, metrics, checkpoints, evaluations, transcripts, events, the dashboard) come straight
 * from the bucket. POST /runs and POST /evaluations leave a queue entry that the trainer box's poller
 * (`esopt trainer-box`) claims and runs; POST /runs/{id}/stop writes the stop.json that box watches.
 */
import { handle, type LambdaEvent } from 'hono/aws-lambda';
import type { Env, Hono, Schema } from 'hono';
import { CloudApiEnv, createCloudApp } from './http-api/cloud-app.ts';

/** Wraps any hono app as a Lambda handler (function URL, API Gateway v1/v2 or ALB events). */
export function lambdaHandlerFor<E extends Env, S extends Schema, B extends string>(app: Hono<E, S, B>) {
  return handle(app);
}

let cached: ReturnType<typeof lambdaHandlerFor> | undefined;

/** The AWS Lambda entry point (`functions/api.handler` in sst.config.ts). */
export const handler = (event: LambdaEvent, context?: Parameters<ReturnType<typeof lambdaHandlerFor>>[1]) => {
  cached ??= lambdaHandlerFor(createCloudApp(CloudApiEnv.parse(process.env)));
  return cached(event, context);
};
