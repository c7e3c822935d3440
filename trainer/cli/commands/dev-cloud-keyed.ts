/**
 * `esopt dev cloud --evaluate URL --model M`: a keyed evaluation of an OpenAI-compatible endpoint through
 * the deployed code paths on this machine. The Api app (createCloudApp) stores the key from ESOPT_EVAL_KEY
 * in the dev SSM endpoint and queues the evaluation in s3rver; the trainer box's poller runs it through
 * the Lambda adapter and the dev invoke endpoint, whose Episode handler reads the key with decryption and
 * calls the endpoint. The report says what SSM saw and where the key was found afterwards: every object
 * in the bucket and every log line are searched (plain and base64), and the answer must be nowhere.
 */
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { createCloudApp } from '../../../functions/http-api/cloud-app.ts';
import { EPISODE_FUNCTION, startLocalCloud } from '../../dev/local-cloud/local-cloud.ts';
import { EvaluationView } from '../../../shared/schemas/index.ts';
import { CloudStack } from '../../assembly/cloud-stack.ts';
import { TrainerBox } from '../../cloud/box/trainer-box.ts';
import { freeLoopbackPort } from '../../serving/free-port.ts';
import { measuredPrices } from '../../fanout/measured-prices.ts';

export interface DevCloudKeyedOptions {
  baseUrl: string;
  model: string;
  apiKey: string;
  episodes: number;
  seed: number;
  log: (message: string) => void;
}

export async function devCloudKeyed(o: DevCloudKeyedOptions) {
  // The box's S3 and Lambda clients take the SDK's default chain; s3rver accepts any pair.
  process.env.AWS_ACCESS_KEY_ID ??= 'S3RVER';
  process.env.AWS_SECRET_ACCESS_KEY ??= 'S3RVER';
  const lines: string[] = [];
  const logger = pino({ level: 'debug' }, new Writable({ write: (chunk, _e, done) => (lines.push(...String(chunk).split('\n').filter(Boolean)), done()) }));
  const port = await freeLoopbackPort();
  const boxToken = randomBytes(24).toString('hex');
  const apiToken = randomBytes(24).toString('hex');
  const cloud = await startLocalCloud({ prices: measuredPrices(), env: { ESOPT_TRAINER_URL: `http://127.0.0.1:${port}/v1`, ESOPT_TRAINER_TOKEN: boxToken }, log: logger });
  const target = CloudStack.parse({ bucket: cloud.s3.bucket, episodeFunction: EPISODE_FUNCTION, s3Endpoint: cloud.s3.endpoint, lambdaEndpoint: cloud.invoke.url });
  const box = new TrainerBox({ cloud: target, publicUrl: `http://127.0.0.1:${port}/v1`, host: '127.0.0.1', port, token: boxToken, claimSettleMs: 50, log: logger, secrets: cloud.secrets });
  try {
    o.log(`s3rver at ${cloud.s3.endpoint}, invoke endpoint at ${cloud.invoke.url}, SSM at ${cloud.ssm.url}`);
    const app = createCloudApp({ ESOPT_BUCKET: cloud.s3.bucket, AWS_REGION: 'us-east-1', ESOPT_TOKEN: apiToken, ESOPT_EVALUATION_KEYS: '/esopt/dev/eval-keys', ESOPT_COST_PRICES: JSON.stringify(measuredPrices()) }, cloud.store, logger, cloud.secrets);
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await app.request(path, { method, headers: { authorization: `Bearer ${apiToken}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
      return { status: res.status, body: (await res.json()) as { id?: string; error?: { message: string } } };
    };
    const post = await call('POST', '/evaluations', {
      model: { kind: 'external', baseUrl: o.baseUrl, model: o.model, apiKey: o.apiKey },
      environment: { name: 'sudoku', options: { size: 4, blanks: 2 } },
      tasks: { split: 'eval', count: Math.min(o.episodes, 8), seed: o.seed },
      episodes: o.episodes,
      concurrency: 4,
      timeoutMs: 60_000,
      // The Api as deployed queues nothing without a spending limit (functions/http-api/cost-caps.ts).
      budget: { maxCostUsd: 1 },
    });
    if (post.status !== 202 || !post.body.id) throw new Error(`POST /evaluations answered ${post.status}: ${post.body.error?.message ?? JSON.stringify(post.body)}`);
    const id = post.body.id;
    o.log(`evaluation ${id} queued; the key is in SSM at ${cloud.ssm.names().join(', ')}; the box runs it …`);
    await box.pollOnce();
    const view = EvaluationView.parse((await call('GET', `/evaluations/${id}`)).body);
    const forms = [o.apiKey, Buffer.from(o.apiKey).toString('base64'), Buffer.from(o.apiKey).toString('base64url')];
    const found: string[] = [];
    for (const key of await cloud.store.list('')) {
      const body = Buffer.from((await cloud.store.get(key)) ?? new Uint8Array());
      if (forms.some((f) => body.includes(f))) found.push(key);
    }
    const loggedAt = lines.flatMap((line, n) => (forms.some((f) => line.includes(f)) ? [`log line ${n}`] : []));
    const count = (action: string) => cloud.ssm.requests.filter((r) => r.action === action).length;
    const rewards = view.episodes.map((e) => e.reward);
    return {
      evaluation: id,
      state: view.status.state,
      error: view.status.error,
      episodes: view.episodes.length,
      failed: view.episodes.filter((e) => e.error !== null).length,
      mean_reward: rewards.length ? rewards.reduce((a, b) => a + b, 0) / rewards.length : null,
      ssm: { put: count('PutParameter'), get: count('GetParameter'), delete: count('DeleteParameter'), left: cloud.ssm.names().length },
      objects_searched: (await cloud.store.list('')).length,
      log_lines_searched: lines.length,
      key_found_in: [...found, ...loggedAt],
    };
  } finally {
    await box.close();
    await cloud.close();
  }
}
