/**
 * The idle stop and the start on queued work: the rule as a pure function; the trainer box (the real
 * TrainerBox over s3rver) deciding to stop, reading its instance id from a metadata service on loopback
 * (IMDSv2: a session token first) and stopping that instance with the real EC2 client; and the Api app
 * starting the instance when it queues work, also while the box is caught stopping. EC2 answers from
 * recorded responses (test/fixtures/aws-doctor/), which also show each request the client sent.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { createCloudApp } from '../../functions/http-api/cloud-app.ts';
import { boxWaker } from '../../functions/http-api/box-wake.ts';
import { startLocalCloud, EPISODE_FUNCTION, DEV_CREDENTIALS, type LocalCloud } from '../../trainer/dev/local-cloud/local-cloud.ts';
import { startEc2Endpoint } from '../../trainer/dev/local-cloud/ec2-endpoint.ts';
import { Ec2Instance } from '../../shared/boxes/ec2-instance.ts';
import { keys } from '../../shared/keys.ts';
import { CloudStack } from '../../trainer/assembly/cloud-stack.ts';
import { idleStopDue } from '../../trainer/cloud/box/idle-stop.ts';
import { instanceIdFromImds } from '../../trainer/cloud/box/instance-identity.ts';
import { TrainerBox } from '../../trainer/cloud/box/trainer-box.ts';
import { tinyRunConfig } from '../api/helpers.ts';
import { esopt } from './helpers/esopt-process.ts';
import { recordedAws, type Recording } from './helpers/recorded-aws.ts';
import { localStackEnv, S3RVER_CREDENTIALS } from './helpers/local-stack-env.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';
import { STACK_CAPS } from './helpers/stack-caps.ts';

const INSTANCE = 'i-0a1b2c3d4e5f60718';
const MINUTE = 60_000;
let cloud: LocalCloud;
const savedEnv = { ...process.env };

beforeAll(async () => {
  Object.assign(process.env, S3RVER_CREDENTIALS);
  cloud = await startLocalCloud({ prices: measuredPrices(), env: {} });
});
afterAll(async () => {
  await cloud?.close();
  for (const k of Object.keys(S3RVER_CREDENTIALS)) delete process.env[k];
  Object.assign(process.env, savedEnv);
});

/** A metadata service that, like IMDSv2, answers the instance id only to a request carrying a session token it issued. */
async function metadataService(): Promise<{ url: string; asked: string[] }> {
  const asked: string[] = [];
  const server: Server = createServer((req, res) => {
    asked.push(`${req.method} ${req.url}`);
    if (req.method === 'PUT' && req.url === '/latest/api/token' && req.headers['x-aws-ec2-metadata-token-ttl-seconds']) return res.end('session-token-1');
    if (req.method === 'GET' && req.url === '/latest/meta-data/instance-id') {
      if (req.headers['x-aws-ec2-metadata-token'] !== 'session-token-1') return res.writeHead(401).end();
      return res.end(INSTANCE);
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, asked };
}

async function ec2(recordings: Record<string, Recording>) {
  const aws = await recordedAws(recordings);
  onTestFinished(() => aws.close());
  const instance = new Ec2Instance({ instanceId: INSTANCE, region: 'us-east-1', endpoint: aws.url, credentials: DEV_CREDENTIALS });
  onTestFinished(() => instance.destroy());
  return { aws, instance };
}

describe('the idle rule', () => {
  it('stops after idleMinutes with nothing running; never at 0 or while busy', () => {
    const at = (minutes: number, busy = false, idleMinutes = 30) => idleStopDue({ idleMinutes, lastBusyAt: 0, now: minutes * MINUTE, busy });
    expect(at(29.9)).toBe(false);
    expect(at(30)).toBe(true);
    expect(at(300, true)).toBe(false);
    expect(at(10_000, false, 0)).toBe(false);
    expect(at(1, false, 1)).toBe(true);
    expect(() => at(1, false, -1)).toThrow(/idleMinutes/);
  });
});

describe('the box stops its own instance when idle', () => {
  it('reads its id with an IMDSv2 session token, then StopInstances on that id once, only when the queue is still empty', async () => {
    const imds = await metadataService();
    const { aws } = await ec2({ 'ec2:StopInstances': { file: 'ec2-StopInstances-running.xml' } });
    const stops: unknown[] = [];
    const target = CloudStack.parse({ bucket: cloud.s3.bucket, episodeFunction: EPISODE_FUNCTION, s3Endpoint: cloud.s3.endpoint, lambdaEndpoint: cloud.invoke.url });
    const box = new TrainerBox({
      cloud: target,
      publicUrl: 'http://127.0.0.1:1/v1',
      host: '127.0.0.1',
      port: 0,
      token: 'idle-stop-test-token',
      idleMinutes: 1,
      stopSelf: async () => {
        const self = new Ec2Instance({ instanceId: await instanceIdFromImds(imds.url), region: 'us-east-1', endpoint: aws.url, credentials: DEV_CREDENTIALS });
        stops.push(await self.stop());
        self.destroy();
      },
      log: pino({ level: 'silent' }),
    });
    onTestFinished(() => box.close());
    const t0 = Date.now();
    expect(await box.stopIfIdle(t0 + 0.5 * MINUTE)).toBe(false);
    // Work queued at the last look: not idle, and the idle period starts again from there.
    await cloud.store.put(keys.queuedWork('run', 'r-idle'), JSON.stringify({ kind: 'run', id: 'r-idle', queuedAt: new Date().toISOString() }));
    expect(await box.stopIfIdle(t0 + 1.1 * MINUTE)).toBe(false);
    await cloud.store.delete(keys.queuedWork('run', 'r-idle'));
    expect(await box.stopIfIdle(t0 + 2 * MINUTE)).toBe(false);
    expect(aws.asked).toEqual([]);
    expect(await box.stopIfIdle(t0 + 2.2 * MINUTE)).toBe(true);
    expect(stops).toEqual([{ previous: 'running', current: 'stopping' }]);
    expect(imds.asked).toEqual(['PUT /latest/api/token', 'GET /latest/meta-data/instance-id']);
    expect(aws.asked).toEqual(['ec2:StopInstances']);
    expect(new URLSearchParams(aws.bodies[0]).get('InstanceId.1')).toBe(INSTANCE);
    // Asked once: the instance is on its way down.
    expect(await box.stopIfIdle(t0 + 10 * MINUTE)).toBe(false);
    expect(aws.asked).toEqual(['ec2:StopInstances']);
  });

  it('a metadata service that refuses the session, or a wrong id, is a clear error; so is an idle stop without stopSelf', async () => {
    const imds = await metadataService();
    await expect(instanceIdFromImds(`${imds.url}/nothing-here`)).rejects.toThrow(/metadata service .* session token request answered 404/);
    await expect(instanceIdFromImds('http://127.0.0.1:9', 300)).rejects.toThrow(/cannot read this instance's id/);
    expect(() => new Ec2Instance({ instanceId: 'web-1' })).toThrow(/instanceId: an EC2 instance id/);
    const target = CloudStack.parse({ bucket: cloud.s3.bucket, episodeFunction: EPISODE_FUNCTION, s3Endpoint: cloud.s3.endpoint, lambdaEndpoint: cloud.invoke.url });
    expect(() => new TrainerBox({ cloud: target, publicUrl: 'http://127.0.0.1:1/v1', port: 0, token: 't', idleMinutes: 5 })).toThrow(/idleMinutes > 0 needs stopSelf/);
  });
});

describe('esopt trainer-box settings', () => {
  it('refuses a negative --idle-minutes and a token parameter that is no SSM name, as usage errors', async () => {
    const env = { ...localStackEnv(cloud), ESOPT_TOKEN: 'cli-test-token' };
    const args = ['trainer-box', '--once', '--public-url', 'http://127.0.0.1:9/v1'];
    const [idle, parameter] = await Promise.all([esopt([...args, '--idle-minutes', '-1'], env), esopt(args, { ...env, ESOPT_TOKEN_PARAMETER: 'trainer token' })]);
    expect(idle.code).toBe(2);
    expect(idle.stderr).toMatch(/--idle-minutes/);
    expect(parameter.code).toBe(2);
    expect(parameter.stderr).toMatch(/ESOPT_TOKEN_PARAMETER: a path of \/-separated segments/);
  }, 30_000);
});

describe('the Api starts the box when it queues work', () => {
  const API_TOKEN = 'idle-stop-test-api-token-01';
  const post = (app: ReturnType<typeof createCloudApp>, path: string, body: unknown) =>
    app.request(path, { method: 'POST', headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });

  it('POST /runs queues the run, then StartInstances on the box (stopped → pending); a running box is left running', async () => {
    const recordings: Record<string, Recording> = { 'ec2:StartInstances': { file: 'ec2-StartInstances-stopped.xml' } };
    const { aws, instance } = await ec2(recordings);
    const app = createCloudApp({ ESOPT_BUCKET: cloud.s3.bucket, ESOPT_TOKEN: API_TOKEN, ESOPT_EVALUATION_KEYS: '/esopt/test/eval-keys', ESOPT_COST_PRICES: JSON.stringify(measuredPrices()), ...STACK_CAPS, ESOPT_TRAINER_INSTANCE: INSTANCE }, cloud.store, pino({ level: 'silent' }), cloud.secrets, instance);
    const res = await post(app, '/runs', tinyRunConfig({ name: 'wakes' }));
    expect(res.status).toBe(201);
    const { id } = (await res.json()) as { id: string };
    expect(await cloud.store.get(keys.queuedWork('run', id))).not.toBeNull();
    expect(aws.asked).toEqual(['ec2:StartInstances']);
    expect(new URLSearchParams(aws.bodies[0]).get('InstanceId.1')).toBe(INSTANCE);
    recordings['ec2:StartInstances'] = { file: 'ec2-StartInstances-running.xml' };
    expect(await instance.start()).toEqual({ previous: 'running', current: 'running' });
    // Without an instance in its environment the Api queues and starts nothing.
    const plain = createCloudApp({ ESOPT_BUCKET: cloud.s3.bucket, ESOPT_TOKEN: API_TOKEN, ESOPT_EVALUATION_KEYS: '/esopt/test/eval-keys', ESOPT_COST_PRICES: JSON.stringify(measuredPrices()), ...STACK_CAPS }, cloud.store, pino({ level: 'silent' }), cloud.secrets);
    expect((await post(plain, '/runs', tinyRunConfig({ name: 'no-wake' }))).status).toBe(201);
    expect(aws.asked).toHaveLength(2);
    expect(() => createCloudApp({ ESOPT_BUCKET: cloud.s3.bucket, ESOPT_TOKEN: API_TOKEN, ESOPT_EVALUATION_KEYS: '/esopt/test/eval-keys', ESOPT_COST_PRICES: JSON.stringify(measuredPrices()), ...STACK_CAPS, ESOPT_TRAINER_INSTANCE: 'box' })).toThrow(/ESOPT_TRAINER_INSTANCE/);
  });

  it('a box caught stopping is started again once it has stopped, within the wait; past it the failure is logged', async () => {
    const recordings: Record<string, Recording> = { 'ec2:StartInstances': { status: 400, file: 'ec2-IncorrectInstanceState-stopping.xml' } };
    const { aws, instance } = await ec2(recordings);
    const lines: { msg: string; error?: string }[] = [];
    const log = { info: (o: object, msg: string) => lines.push({ ...o, msg }), error: (o: object, msg: string) => lines.push({ ...o, msg }) } as never;
    let slept = 0;
    const wake = boxWaker(instance, log, {
      retryMs: 2000,
      withinMs: 6000,
      // Two waits later the instance has stopped.
      sleep: async () => {
        if (++slept === 2) recordings['ec2:StartInstances'] = { file: 'ec2-StartInstances-stopped.xml' };
      },
    });
    await wake();
    expect(aws.asked).toEqual(['ec2:StartInstances', 'ec2:StartInstances', 'ec2:StartInstances']);
    expect(lines.map((l) => l.msg)).toEqual(['queued work: the trainer box is starting']);

    recordings['ec2:StartInstances'] = { status: 400, file: 'ec2-IncorrectInstanceState-stopping.xml' };
    slept = -100;
    await boxWaker(instance, log, { retryMs: 2000, withinMs: 6000, sleep: async () => {} })();
    expect(aws.asked).toHaveLength(3 + 4);
    expect(lines.at(-1)).toMatchObject({ msg: expect.stringMatching(/could not start the trainer box/), error: expect.stringMatching(/not in a state from which it can be started/) });
  });

  it('against the dev EC2 endpoint: a start right after the idle stop waits out the stopping state, then starts the box', async () => {
    const endpoint = await startEc2Endpoint({ [INSTANCE]: 'running' }, 150);
    onTestFinished(() => endpoint.close());
    const instance = new Ec2Instance({ instanceId: INSTANCE, region: 'us-east-1', endpoint: endpoint.url, credentials: DEV_CREDENTIALS });
    onTestFinished(() => instance.destroy());
    expect(await instance.stop()).toEqual({ previous: 'running', current: 'stopping' });
    const lines: string[] = [];
    await boxWaker(instance, { info: (_o: object, m: string) => lines.push(m), error: (_o: object, m: string) => lines.push(m) } as never, { retryMs: 60, withinMs: 2000 })();
    expect(lines).toEqual(['queued work: the trainer box is starting']);
    expect(endpoint.requests.map((r) => r.action).slice(0, 3)).toEqual(['StopInstances', 'StartInstances', 'StartInstances']);
    expect(endpoint.requests.length).toBeGreaterThanOrEqual(3);
    expect(endpoint.state(INSTANCE)).toMatch(/^(pending|running)$/);
  });
});
