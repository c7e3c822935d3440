/**
 * A keyed evaluation through exactly the deployed code paths, on loopback: the Api app (createCloudApp)
 * stores the endpoint's key in Parameter Store (the SSM adapter against the dev SSM endpoint) and queues
 * the evaluation in s3rver; the trainer box's poller claims it and fans its episodes out through the
 * Lambda adapter to the dev invoke endpoint, whose Episode handler reads the key with decryption and
 * plays against an OpenAI-compatible agent that checks it. Then every object in the bucket, every log
 * line of the Api, the box and the handler, and what the API serves are searched for the key (plain,
 * base64, base64url): none may hold it. Also: a key is never sent to another origin (an event naming one,
 * a redirect), an endpoint echoing its key gets it redacted, and a key that expired fails the evaluation.
 */
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCloudApp } from '../../functions/http-api/cloud-app.ts';
import { EPISODE_FUNCTION, startLocalCloud, type LocalCloud } from '../../trainer/dev/local-cloud/local-cloud.ts';
import { REDACTED } from '../../functions/secret-redaction.ts';
import { sudoku } from '../../environments/sudoku/definition.ts';
import { keys } from '../../shared/keys.ts';
import { EVALUATION_KEY_LIFETIME_MS, storeEvaluationKey } from '../../shared/secrets/evaluation-key.ts';
import { EvaluationView, QueuedWork, type EpisodeRequest, type EvaluationRequestInput } from '../../shared/schemas/index.ts';
import { CloudStack } from '../../trainer/assembly/cloud-stack.ts';
import { TrainerBox } from '../../trainer/cloud/box/trainer-box.ts';
import { startAgentServer, type AgentServer } from '../api/agent-server.ts';
import { freePort } from './helpers/esopt-process.ts';
import { S3RVER_CREDENTIALS } from './helpers/local-stack-env.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';
import { STACK_CAPS } from './helpers/stack-caps.ts';

const KEY = 'sk-live-3f9a1c7e5b2d-never-lands';
const BOX_TOKEN = 'evaluation-key-box-token-5e1';
const API_TOKEN = 'evaluation-key-api-token-0123456';
const PATH = '/esopt/test/eval-keys';
const OPTIONS = { size: 4, blanks: 2 } as const;
const TASKS = sudoku.sampleTasks('eval', 3, 5, sudoku.optionsSchema.parse(OPTIONS));
/** The SDK's default chain for the box's S3 and Lambda clients (s3rver's pair), as the box gets its role's. */

interface Seen {
  path: string;
  authorization: string | null;
}
interface Fake {
  baseUrl: string;
  seen: Seen[];
  close(): Promise<void>;
}

/** A loopback server that notes every request's Authorization and answers with `reply`. */
async function startFake(reply: (c: { authorization: string | null }) => Response): Promise<Fake> {
  const seen: Seen[] = [];
  const app = new Hono();
  app.all('*', (c) => {
    const authorization = c.req.header('authorization') ?? null;
    seen.push({ path: c.req.path, authorization });
    return reply({ authorization });
  });
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
  });
  return { baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, seen, close: () => new Promise((r) => server.close(() => r())) };
}

const completion = (content: string) =>
  Response.json({ id: 'c', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }], usage: { prompt_tokens: 5, completion_tokens: 5 } });

let now = Date.now();
let cloud: LocalCloud;
let app: ReturnType<typeof createCloudApp>;
let box: TrainerBox;
let agent: AgentServer;
let elsewhere: Fake;
const logs: string[] = [];
const savedEnv = { ...process.env };

async function call(method: string, path: string, body?: unknown) {
  const res = await app.request(path, { method, headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as any };
}

const request = (baseUrl: string, overrides: Partial<EvaluationRequestInput> = {}): EvaluationRequestInput => ({
  model: { kind: 'external', baseUrl, model: 'their-agent', apiKey: KEY },
  environment: { name: 'sudoku', options: OPTIONS },
  tasks: { tasks: TASKS.map((t) => ({ id: t.id, task: t.task })) },
  episodes: 3,
  concurrency: 2,
  timeoutMs: 30_000,
  ...overrides,
});

/** Where the key (or its base64 / base64url) is: objects in the bucket, log lines, and the given API answers. */
async function leaks(served: unknown[] = []): Promise<string[]> {
  const forms = [KEY, Buffer.from(KEY).toString('base64'), Buffer.from(KEY).toString('base64url'), Buffer.from(`Bearer ${KEY}`).toString('base64')];
  const found: string[] = [];
  const keysInBucket = await cloud.store.list('');
  expect(keysInBucket.length).toBeGreaterThan(0);
  for (const key of keysInBucket) {
    const body = Buffer.from((await cloud.store.get(key))!);
    if (forms.some((f) => body.includes(f))) found.push(`object ${key}`);
  }
  logs.forEach((line, n) => forms.some((f) => line.includes(f)) && found.push(`log line ${n}: ${line.slice(0, 200)}`));
  served.forEach((answer, n) => forms.some((f) => JSON.stringify(answer).includes(f)) && found.push(`API answer ${n}`));
  return found;
}

beforeAll(async () => {
  Object.assign(process.env, S3RVER_CREDENTIALS);
  const log = pino({ level: 'debug' }, new Writable({ write: (chunk, _e, done) => (logs.push(...String(chunk).split('\n').filter(Boolean)), done()) }));
  const port = await freePort();
  // The Episode function's environment as deployed (its trainer URL and token), its log captured.
  cloud = await startLocalCloud({ prices: measuredPrices(), env: { ESOPT_TRAINER_URL: `http://127.0.0.1:${port}/v1`, ESOPT_TRAINER_TOKEN: BOX_TOKEN }, log, ssmClock: () => now });
  const target = CloudStack.parse({ bucket: cloud.s3.bucket, episodeFunction: EPISODE_FUNCTION, s3Endpoint: cloud.s3.endpoint, lambdaEndpoint: cloud.invoke.url });
  app = createCloudApp({ ESOPT_BUCKET: cloud.s3.bucket, AWS_REGION: 'us-east-1', ESOPT_TOKEN: API_TOKEN, ESOPT_EVALUATION_KEYS: PATH, ESOPT_COST_PRICES: JSON.stringify(measuredPrices()), ...STACK_CAPS }, cloud.store, log, cloud.secrets);
  box = new TrainerBox({ cloud: target, publicUrl: `http://127.0.0.1:${port}/v1`, host: '127.0.0.1', port, token: BOX_TOKEN, pollMs: 100, claimSettleMs: 50, log, secrets: cloud.secrets });
  agent = await startAgentServer(KEY, TASKS, () => true);
  elsewhere = await startFake(() => completion('place 1 1 1'));
});

afterAll(async () => {
  await box?.close();
  await agent?.close();
  await elsewhere?.close();
  await cloud?.close();
  for (const k of Object.keys(S3RVER_CREDENTIALS)) delete process.env[k];
  Object.assign(process.env, savedEnv);
});

describe('a keyed evaluation on the deployed code paths', () => {
  it('reaches the endpoint with its key, which never lands in the bucket, a log, a transcript or an API answer, and is deleted at the end', async () => {
    cloud.ssm.requests.length = 0;
    const post = await call('POST', '/evaluations', request(agent.baseUrl));
    expect(post.status).toBe(202);
    const id = post.body.id as string;
    const parameter = `${PATH}/${id}`;
    expect(cloud.ssm.names()).toEqual([parameter]);
    const entry = QueuedWork.parse(JSON.parse(new TextDecoder().decode((await cloud.store.get(keys.queuedWork('evaluation', id)))!)));
    expect(entry.apiKey).toEqual({ parameter, origin: new URL(agent.baseUrl).origin });

    expect(await box.pollOnce()).toEqual([{ kind: 'evaluation', id }]);
    const view = EvaluationView.parse((await call('GET', `/evaluations/${id}`)).body);
    expect(view.status).toMatchObject({ state: 'finished', stopReason: 'completed', planned: 3, dispatched: 3, error: null });
    // The agent saw the right key on every call (it answers 401 otherwise) and solved every task.
    expect(agent.unauthorized).toBe(0);
    expect(agent.calls.length).toBeGreaterThanOrEqual(3);
    for (const e of view.episodes) expect(e, JSON.stringify(e)).toMatchObject({ error: null, reward: 1 });

    // Stored by the Api as a SecureString, read decrypted by the Episode handler, deleted by the box.
    const actions = cloud.ssm.requests.map((r) => r.action);
    expect(actions[0]).toBe('PutParameter');
    expect(cloud.ssm.requests[0].input).toMatchObject({ Name: parameter, Type: 'SecureString', Overwrite: false, Tier: 'Advanced' });
    const gets = cloud.ssm.requests.filter((r) => r.action === 'GetParameter');
    expect(gets.length).toBeGreaterThanOrEqual(1);
    for (const g of gets) expect(g.input).toEqual({ Name: parameter, WithDecryption: true });
    expect(actions.at(-1)).toBe('DeleteParameter');
    expect(cloud.ssm.names()).toEqual([]);

    const transcripts = await Promise.all(view.episodes.map(async (e) => (await call('GET', e.transcript as string)).body));
    expect(transcripts.every((t) => t.entries.length > 1)).toBe(true);
    expect((await cloud.store.list(keys.run(id))).some((k) => k.includes('/transcripts/'))).toBe(true);
    expect(logs.length).toBeGreaterThan(10);
    expect(await leaks([view, transcripts, (await call('GET', '/evaluations')).body])).toEqual([]);
  }, 120_000);

  it('an endpoint that echoes the key gets it redacted from the transcript and the record', async () => {
    const echo = await startFake(({ authorization }) => (authorization === `Bearer ${KEY}` ? completion(`you sent me ${authorization}`) : new Response('no', { status: 401 })));
    try {
      const id = (await call('POST', '/evaluations', request(echo.baseUrl, { episodes: 1, tasks: { tasks: [{ id: TASKS[0].id, task: TASKS[0].task }] } }))).body.id as string;
      expect(await box.pollOnce()).toEqual([{ kind: 'evaluation', id }]);
      expect(echo.seen.length).toBeGreaterThan(0);
      expect(echo.seen.every((s) => s.authorization === `Bearer ${KEY}`)).toBe(true);
      const view = EvaluationView.parse((await call('GET', `/evaluations/${id}`)).body);
      const transcript = (await call('GET', view.episodes[0].transcript as string)).body;
      expect(JSON.stringify(transcript)).toContain(`you sent me Bearer ${REDACTED}`);
      expect(await leaks([view, transcript])).toEqual([]);
    } finally {
      await echo.close();
    }
  }, 60_000);

  it('never sends the key to another origin: not to an event naming one, not after a redirect', async () => {
    // An episode event naming a stored key with some other endpoint (or fallback) is refused before any request.
    const ref = await storeEvaluationKey(cloud.secrets, PATH, 'eval-direct', KEY, agent.baseUrl);
    const episode = (policy: Partial<EpisodeRequest['policy']>, task: string): EpisodeRequest => ({
      run: 'eval-direct',
      iteration: 0,
      member: 'base',
      task: { id: task, value: TASKS[0].task },
      environment: { name: 'sudoku', options: OPTIONS },
      policy: { baseUrl: elsewhere.baseUrl, model: 'x', tokenParameter: ref.parameter, ...policy },
      generation: { temperature: 0, topP: 1, topK: 0, maxTokens: 16 },
      seed: 1,
      deadline: new Date(Date.now() + 30_000).toISOString(),
    });
    const res = await fetch(`${cloud.invoke.url}/2015-03-31/functions/${EPISODE_FUNCTION}/invocations`, {
      method: 'POST',
      headers: { 'x-amz-invocation-type': 'RequestResponse', 'content-type': 'application/json' },
      body: JSON.stringify({ episodes: [episode({}, 'other-origin'), episode({ baseUrl: agent.baseUrl, fallbackUrls: [elsewhere.baseUrl] }, 'other-fallback')] }),
    });
    const outcomes = ((await res.json()) as { outcomes: { error: string | null }[] }).outcomes;
    expect(outcomes.map((o) => o.error)).toEqual([expect.stringMatching(/^evaluation key: refusing to send the key in \S+ to http:\/\/127\.0\.0\.1:\d+: it is only for /), expect.stringMatching(/^evaluation key: refusing/)]);
    expect(elsewhere.seen).toEqual([]);
    await cloud.secrets.delete(ref.parameter);

    // The key's own origin redirecting elsewhere: the redirected request must not carry it.
    const redirector = await startFake(() => new Response(null, { status: 307, headers: { location: `${elsewhere.baseUrl}/chat/completions` } }));
    try {
      const id = (await call('POST', '/evaluations', request(redirector.baseUrl, { episodes: 1, tasks: { tasks: [{ id: TASKS[0].id, task: TASKS[0].task }] } }))).body.id as string;
      expect(await box.pollOnce()).toEqual([{ kind: 'evaluation', id }]);
      expect(redirector.seen[0].authorization).toBe(`Bearer ${KEY}`);
      // Never followed: an endpoint that is not ours is called through environments/outbound/, where a 3xx ends the call.
      expect(elsewhere.seen).toEqual([]);
      const errors = ((await call('GET', `/evaluations/${id}`)).body as { episodes: { error: string | null }[] }).episodes.map((e) => e.error);
      expect(errors.length).toBeGreaterThan(0);
      for (const e of errors) expect(e).toMatch(/307 \(a redirect\); redirects are not followed/);
      expect(await leaks()).toEqual([]);
    } finally {
      await redirector.close();
    }
  }, 60_000);

  it('the key is deleted when the evaluation cannot be queued, and when the box finds it no longer queued', async () => {
    // The queue entry's write fails: the Api function deletes the key it stored a moment before.
    const failing = Object.create(cloud.store, { put: { value: (key: string, ...rest: unknown[]) => (key.startsWith('queue/') ? Promise.reject(new Error('SlowDown')) : (cloud.store.put as Function).call(cloud.store, key, ...rest)) } });
    const broken = createCloudApp({ ESOPT_BUCKET: cloud.s3.bucket, AWS_REGION: 'us-east-1', ESOPT_TOKEN: API_TOKEN, ESOPT_EVALUATION_KEYS: PATH, ESOPT_COST_PRICES: JSON.stringify(measuredPrices()), ...STACK_CAPS }, failing, pino({ level: 'silent' }), cloud.secrets);
    const res = await broken.request('/evaluations', { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify(request(agent.baseUrl)) });
    expect(res.status).toBe(500);
    expect(cloud.ssm.names()).toEqual([]);
    expect(cloud.ssm.requests.slice(-2).map((r) => r.action)).toEqual(['PutParameter', 'DeleteParameter']);

    // Queued, then failed by something else before the box claimed it: the box deletes the key and runs nothing.
    const id = (await call('POST', '/evaluations', request(agent.baseUrl))).body.id as string;
    expect(cloud.ssm.names()).toEqual([`${PATH}/${id}`]);
    const status = JSON.parse(new TextDecoder().decode((await cloud.store.get(keys.evaluationStatus(id)))!));
    await cloud.store.put(keys.evaluationStatus(id), JSON.stringify({ ...status, state: 'failed', error: 'cancelled' }));
    const calls = agent.calls.length;
    // Ended already, it is not claimed: its entry goes and its key with it.
    expect(await box.pollOnce()).toEqual([]);
    expect(cloud.ssm.names()).toEqual([]);
    expect(agent.calls.length).toBe(calls);
  }, 60_000);

  it('a key that expired before the box got to it fails the evaluation with a clear error, at once', async () => {
    const calls = agent.calls.length;
    const id = (await call('POST', '/evaluations', request(agent.baseUrl, { episodes: 6 }))).body.id as string;
    now = Date.now() + EVALUATION_KEY_LIFETIME_MS + 1000;
    const started = Date.now();
    expect(await box.pollOnce()).toEqual([{ kind: 'evaluation', id }]);
    expect(Date.now() - started).toBeLessThan(20_000);
    const view = EvaluationView.parse((await call('GET', `/evaluations/${id}`)).body);
    expect(view.status.state, JSON.stringify(view)).toBe('failed');
    expect(view.status.error).toMatch(new RegExp(`^evaluation key: ${PATH}/${id} does not exist: it is deleted when its evaluation ends and expires 72 h after it was queued`));
    // One wave ran into it, no more: with a cost budget (the stack's cap) the first wave is one episode.
    expect(view.status.dispatched).toBe(1);
    expect(agent.calls.length).toBe(calls);
    expect(cloud.ssm.names()).toEqual([]);
    expect(await leaks([view])).toEqual([]);
  }, 60_000);
});
