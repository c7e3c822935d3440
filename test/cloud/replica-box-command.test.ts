/**
 * `esopt replica-box` as the replica box's unit runs it (a child process with only the box's environment),
 * against s3rver: --once follows the run named in trainer/active-run.json over TLS, announcing the very
 * certificate its server presents (checked with a TLS handshake), and lets the run go when it is stopped.
 */
import { connect } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalS3, type LocalS3 } from '../../trainer/dev/local-cloud/s3-server.ts';
import { keys } from '../../shared/keys.ts';
import { ReplicaAnnouncement, RunConfig, type ActiveRun, type RunStatus } from '../../shared/schemas/index.ts';
import { S3ObjectStore } from '../../shared/store/s3.ts';
import { readJson, writeJson } from '../../shared/store/json.ts';
import { tinyRunConfig } from '../api/helpers.ts';
import { esopt, freePort } from './helpers/esopt-process.ts';
import { S3RVER_CREDENTIALS } from './helpers/local-stack-env.ts';

let s3: LocalS3;
let store: S3ObjectStore;

beforeAll(async () => {
  s3 = await startLocalS3('esopt-replica-box');
  store = new S3ObjectStore(s3.storeConfig);
});
afterAll(async () => {
  store?.destroy();
  await s3?.close();
});

/** The SHA-256 fingerprint of the certificate the server at 127.0.0.1:port presents. */
function presented(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
      resolve(socket.getPeerCertificate().fingerprint256);
      socket.end();
    });
    socket.once('error', reject);
  });
}

describe('esopt replica-box', () => {
  it('--once follows the active run over TLS, announcing the certificate it serves, and lets a stopped run go', async () => {
    const port = await freePort();
    const env = { ...S3RVER_CREDENTIALS, ESOPT_BUCKET: s3.bucket, ESOPT_EPISODE_FUNCTION: 'Episode', AWS_REGION: 'us-east-1', AWS_ENDPOINT_URL_S3: s3.endpoint };
    const args = ['replica-box', '--once', '--json', '--id', 'replica-1', '--public-url', `https://127.0.0.1:${port}/v1`, '--host', '127.0.0.1', '--port', String(port), '--poll-ms', '100'];
    const missing = await esopt(args, env);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/ESOPT_TOKEN is not set/);
    // Nothing named yet.
    const idle = await esopt(args, { ...env, ESOPT_TOKEN: 'box-token' });
    expect(idle.code, idle.stderr).toBe(0);
    expect(JSON.parse(idle.stdout.trim())).toEqual({ followed: null });

    // What the trainer box writes when it starts a run.
    const now = new Date().toISOString();
    const status: RunStatus = { run: 'r1', state: 'running', requestedAt: now, startedAt: now, finishedAt: null, error: null, updatedAt: now };
    await writeJson(store, keys.config('r1'), RunConfig.parse(tinyRunConfig({ name: 'replica-box' })));
    await writeJson(store, keys.runStatus('r1'), status);
    await writeJson(store, keys.activeRun(), { run: 'r1', startedAt: now } satisfies ActiveRun);
    const following = esopt(args, { ...env, ESOPT_TOKEN: 'box-token' });
    let announced: ReplicaAnnouncement | null = null;
    while (!(announced = await readJson(store, keys.replica('r1', 'replica-1'), ReplicaAnnouncement))) await new Promise((r) => setTimeout(r, 100));
    expect(announced.baseUrl).toBe(`https://127.0.0.1:${port}/v1`);
    expect(announced.tls?.sha256).toBe(await presented(port));
    expect(JSON.stringify(announced)).not.toContain('PRIVATE KEY');
    await writeJson(store, keys.runStatus('r1'), { ...status, state: 'stopped', finishedAt: new Date().toISOString() } satisfies RunStatus);
    const exit = await following;
    expect(exit.code, exit.stderr).toBe(0);
    expect(JSON.parse(exit.stdout.trim().split('\n').at(-1) as string)).toEqual({ followed: 'r1' });
  }, 120_000);
});
