/**
 * Rotating the stack's token while a run trains, on loopback through the deployed code paths: the trainer
 * box (TrainerBox with its token gate, following the token parameter in the dev SSM endpoint through the
 * SSM adapter) trains a queued run whose episodes the real Episode handler plays through the Lambda adapter
 * and the dev invoke endpoint. A proxy in front of the box holds every old-token request from the first one
 * of iteration 1 on; meanwhile the test rotates as a deploy does (the parameter first, then the function's
 * environment), so those episodes are in flight with the old token when the box changes over. Every
 * episode must still count; after the grace the old token gets 401 and the new one is served. The Episode
 * handler is the same warm instance throughout: it reads ESOPT_TRAINER_TOKEN from its environment at each
 * episode and caches nothing, so the episodes after the change send the new token.
 */
import { PutParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCloudApp } from '../../functions/http-api/cloud-app.ts';
import { DEV_CREDENTIALS, EPISODE_FUNCTION, startLocalCloud, type LocalCloud } from '../../trainer/dev/local-cloud/local-cloud.ts';
import { keys } from '../../shared/keys.ts';
import { MetricsRow, RunDetail } from '../../shared/schemas/index.ts';
import { CloudStack } from '../../trainer/assembly/cloud-stack.ts';
import { TrainerBox } from '../../trainer/cloud/box/trainer-box.ts';
import { tinyRunConfig, waitFor } from '../api/helpers.ts';
import { freePort } from './helpers/esopt-process.ts';
import { S3RVER_CREDENTIALS } from './helpers/local-stack-env.ts';
import { startLoopbackProxy, type LoopbackProxy } from './helpers/loopback-proxy.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';
import { STACK_CAPS } from './helpers/stack-caps.ts';

const OLD = 'rotation-test-old-token-01';
const NEW = 'rotation-test-new-token-02';
const API_TOKEN = 'rotation-test-api-token-0123';
const PARAMETER = '/esopt/test/trainer-token';
const GRACE_MS = 1000;

let cloud: LocalCloud;
let proxy: LoopbackProxy;
let box: TrainerBox;
let ssm: SSMClient;
const savedEnv = { ...process.env };
/** The Episode function's environment; the rotation changes it as a deploy does. */
const episodeEnv: Record<string, string | undefined> = {};

afterAll(async () => {
  await box?.close();
  await proxy?.close();
  ssm?.destroy();
  await cloud?.close();
  for (const k of Object.keys(S3RVER_CREDENTIALS)) delete process.env[k];
  Object.assign(process.env, savedEnv);
});

describe('token rotation during a run', () => {
  let port: number;
  beforeAll(async () => {
    Object.assign(process.env, S3RVER_CREDENTIALS);
    port = await freePort();
  });

  it('counts every episode through a rotation mid-iteration; after the grace the old token gets 401', async () => {
    let run: string | undefined;
    let phase: 'before' | 'holding' | 'released' = 'before';
    let held = 0;
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let rotation: Promise<number> | undefined;
    // Holds the old-token requests of episodes in flight from iteration 1 on, until the rotation is done.
    proxy = await startLoopbackProxy(`http://127.0.0.1:${port}`, async (req) => {
      if (!req.url?.endsWith('/chat/completions')) return null;
      if (phase === 'before' && run && (await cloud.store.get(keys.metricsRow(run, 0)))) {
        phase = 'holding';
        rotation = rotate();
      }
      if (phase === 'holding' && req.headers.authorization === `Bearer ${OLD}`) {
        held++;
        await released;
      }
      return null;
    });
    Object.assign(episodeEnv, { ESOPT_TRAINER_URL: `${proxy.url}/v1`, ESOPT_TRAINER_TOKEN: OLD });
    cloud = await startLocalCloud({ prices: measuredPrices(), env: episodeEnv });
    ssm = new SSMClient({ endpoint: cloud.ssm.url, region: 'us-east-1', credentials: DEV_CREDENTIALS });
    const setParameter = (value: string) => ssm.send(new PutParameterCommand({ Name: PARAMETER, Value: value, Type: 'SecureString', Overwrite: true }));
    await setParameter(OLD);

    /** A deploy after `sst secret set`: the parameter, then the function (its environment takes the parameter's value). */
    async function rotate(): Promise<number> {
      // Let the other episodes of the iteration reach the proxy with the old token too.
      await new Promise((r) => setTimeout(r, 300));
      await setParameter(NEW);
      episodeEnv.ESOPT_TRAINER_TOKEN = NEW;
      // The box's periodic read is a minute away: the first new-token request makes it read at once.
      const probe = await fetch(`http://127.0.0.1:${port}/v1/models`, { headers: { authorization: `Bearer ${NEW}` } });
      phase = 'released';
      release();
      return probe.status;
    }

    const target = CloudStack.parse({ bucket: cloud.s3.bucket, episodeFunction: EPISODE_FUNCTION, s3Endpoint: cloud.s3.endpoint, lambdaEndpoint: cloud.invoke.url });
    box = new TrainerBox({
      cloud: target,
      publicUrl: `${proxy.url}/v1`,
      host: '127.0.0.1',
      port,
      token: OLD,
      tokenFollow: { parameter: PARAMETER, graceMs: GRACE_MS },
      secrets: cloud.secrets,
      claimSettleMs: 50,
      stopPollMs: 50,
      trainingPollMs: 20,
      log: pino({ level: 'silent' }),
    });
    const app = createCloudApp({ ESOPT_BUCKET: cloud.s3.bucket, ESOPT_TOKEN: API_TOKEN, ESOPT_EVALUATION_KEYS: '/esopt/test/eval-keys', ESOPT_COST_PRICES: JSON.stringify(measuredPrices()), ...STACK_CAPS }, cloud.store, pino({ level: 'silent' }), cloud.secrets);
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await app.request(path, { method, headers: { authorization: `Bearer ${API_TOKEN}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
      return { status: res.status, body: (await res.json()) as any };
    };
    const posted = await call('POST', '/runs', tinyRunConfig({ name: 'rotation', iterations: 500, evalInterval: 500, checkpointInterval: 500 }));
    expect(posted.status).toBe(201);
    run = posted.body.id as string;
    const ran = box.pollOnce();

    expect(await waitFor(async () => rotation, 60_000, 'the rotation')).toBeDefined();
    // The box took the new token on the first request that carried it.
    expect(await rotation).toBe(200);
    expect(held).toBeGreaterThan(0);

    // After the grace: the old token is refused, the new one served (while the run still trains).
    await new Promise((r) => setTimeout(r, GRACE_MS + 200));
    const asked = async (token: string) => (await fetch(`http://127.0.0.1:${port}/v1/models`, { headers: { authorization: `Bearer ${token}` } })).status;
    expect(await asked(OLD)).toBe(401);
    expect(await asked(NEW)).toBe(200);
    const detail = RunDetail.parse((await call('GET', `/runs/${run}`)).body);
    expect(detail.state).toBe('running');

    expect((await call('POST', `/runs/${run}/stop`)).status).toBe(202);
    expect(await ran).toEqual([{ kind: 'run', id: run }]);
    const done = RunDetail.parse((await call('GET', `/runs/${run}`)).body);
    expect(done.state).toBe('stopped');
    expect(done.completedIterations).toBeGreaterThanOrEqual(3);
    // Every episode of every iteration counted, the ones held across the rotation included.
    for (let k = 0; k < done.completedIterations; k++) {
      const row = MetricsRow.parse(JSON.parse(new TextDecoder().decode((await cloud.store.get(keys.metricsRow(run, k)))!)));
      expect(row, `iteration ${k}`).toMatchObject({ failed: 0, counted: row.expected });
    }
    // Episodes that started after the rotation sent the new token.
    expect(proxy.seen.filter((r) => r.headers.authorization === `Bearer ${NEW}`).length).toBeGreaterThan(0);
  }, 60_000);
});
