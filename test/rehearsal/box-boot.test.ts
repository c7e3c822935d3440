/**
 * trainer/cloud/box/box-boot.sh, the boot every box's user data runs, rehearsed into an empty directory against
 * s3rver and the local SSM (trainer/dev/rehearsal/box-install.ts): the real artifact installed and the unit's
 * command line read back; failures (a wrong artifact hash, a missing token parameter) written to the bucket as
 * `failed` with the step and the log tail, and a non-zero exit; a step that fails twice, then succeeds.
 */
import { GetParameterCommand, PutParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalS3, type LocalS3 } from '../../trainer/dev/local-cloud/s3-server.ts';
import { startSsmEndpoint, type SsmEndpoint } from '../../trainer/dev/local-cloud/ssm-endpoint.ts';
import { seedIsolatedVmPrebuild } from '../../trainer/dev/rehearsal/prebuilt-binaries.ts';
import { buildBoxArtifact, type BoxArtifact } from '../../trainer/cloud/box/box-artifact.ts';
import { keys } from '../../shared/keys.ts';
import { S3ObjectStore } from '../../shared/store/s3.ts';
import { rehearseBoxInstall, rehearseBoxUpdate, SERVICE_USER, type BoxBootVariables } from '../../trainer/dev/rehearsal/box-install.ts';

const TOKEN = 'boot-test-token-0123456789abcdef';
const PARAMETER = '/esopt/rehearsal/trainer-token';
let s3: LocalS3;
let ssm: SsmEndpoint;
let store: S3ObjectStore;
let artifact: BoxArtifact;
const scratch = mkdtempSync(join(tmpdir(), 'esopt-box-boot-'));
// Traversable, as a box's / is: the service's unprivileged user reaches the install through it.
chmodSync(scratch, 0o755);

const variables = (over: Partial<BoxBootVariables> = {}): BoxBootVariables => ({
  ESOPT_BOOT_BOX: 'trainer',
  ESOPT_BOOT_REGION: 'us-east-1',
  ESOPT_BOOT_BUCKET: s3.bucket,
  ESOPT_BOOT_TOKEN_PARAMETER: PARAMETER,
  ESOPT_BOOT_EPISODE_FUNCTION: 'esopt-rehearsal-Episode',
  ESOPT_BOOT_SERVICE: 'esopt-trainer-box',
  ESOPT_BOOT_DESCRIPTION: 'esopt trainer box (rehearsal)',
  ESOPT_BOOT_ARGS: 'trainer-box --host 127.0.0.1 --port 8443 --public-url https://127.0.0.1:8443/v1 --provider cpu',
  ESOPT_BOOT_PROVIDER: 'cpu',
  ESOPT_BOOT_LOG_GROUP: '/esopt/rehearsal/boxes',
  ESOPT_BOOT_STOP_TIMEOUT_S: '1020',
  ...over,
});
let boxes = 0;
const emptyRoot = () => mkdtempSync(join(scratch, `box-${++boxes}-`));
const common = () => ({ s3Endpoint: s3.endpoint, ssmEndpoint: ssm.url });
/** What a deploy writes: the pointer every box installs from. */
const pointTo = (a: Pick<BoxArtifact, 'key' | 'sha256'>) => store.put(keys.artifactPointer(), JSON.stringify({ key: a.key, sha256: a.sha256 }));

/** A small artifact of its own: a tree with one marker file, as buildBoxArtifact names and hashes one. */
async function markerArtifact(marker: string): Promise<Pick<BoxArtifact, 'key' | 'sha256'> & { bytes: Buffer }> {
  const dir = mkdtempSync(join(scratch, 'tree-'));
  writeFileSync(join(dir, 'marker.txt'), marker);
  const tgz = join(scratch, `${marker}.tgz`);
  expect(spawnSync('tar', ['-czf', tgz, '-C', dir, 'marker.txt']).status).toBe(0);
  const bytes = readFileSync(tgz);
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  return { key: `artifacts/esopt-${sha256}.tgz`, sha256, bytes };
}

beforeAll(async () => {
  [s3, ssm] = await Promise.all([startLocalS3('esopt-boot'), startSsmEndpoint()]);
  // As the rehearsal does: the box's npm ci finds isolated-vm's binary where it would download it (GitHub is out of reach).
  seedIsolatedVmPrebuild(process.cwd());
  store = new S3ObjectStore(s3.storeConfig);
  artifact = buildBoxArtifact(process.cwd(), join(scratch, 'artifact'));
  await store.put(artifact.key, readFileSync(artifact.path));
  await pointTo(artifact);
  const client = new SSMClient({ region: 'us-east-1', endpoint: ssm.url, credentials: { accessKeyId: 'x', secretAccessKey: 'x' } });
  await client.send(new PutParameterCommand({ Name: PARAMETER, Type: 'SecureString', Value: TOKEN }));
  expect((await client.send(new GetParameterCommand({ Name: PARAMETER, WithDecryption: true }))).Parameter?.Value).toBe(TOKEN);
  client.destroy();
});

// Removing five boxes' installs (node_modules, node) takes a while on a loaded machine.
afterAll(async () => {
  store?.destroy();
  await Promise.all([s3?.close(), ssm?.close()]);
  rmSync(scratch, { recursive: true, force: true });
}, 180_000);

describe('the box boot (trainer/cloud/box/box-boot.sh) rehearsed', () => {
  it('installs the deploy\'s artifact into an empty directory and writes `ready`; the unit runs the CLI with the stack\'s environment', async () => {
    const root = emptyRoot();
    const done = await rehearseBoxInstall({ root, variables: variables(), ...common(), timeoutMs: 600_000 });
    expect(done.exitCode, done.log.slice(-3000)).toBe(0);
    expect(done.state).toMatchObject({ box: 'trainer', step: 'ready', status: 'ready', artifactSha256: artifact.sha256 });
    expect(done.state?.error).toBeUndefined();
    expect(done.service?.command).toEqual([join(done.paths.nodeDir, 'bin/node'), 'trainer/cli/bin.js', 'trainer-box', '--host', '127.0.0.1', '--port', '8443', '--public-url', 'https://127.0.0.1:8443/v1', '--provider', 'cpu']);
    expect(done.service?.cwd).toBe(done.paths.app);
    expect(done.service?.env).toEqual({ ESOPT_TOKEN: TOKEN, ESOPT_BUCKET: s3.bucket, ESOPT_EPISODE_FUNCTION: 'esopt-rehearsal-Episode', AWS_REGION: 'us-east-1', ESOPT_LOG_GROUP: '/esopt/rehearsal/boxes', ESOPT_LOG_STREAM: 'trainer', ESOPT_ARTIFACT_SHA256: artifact.sha256, ESOPT_TOKEN_PARAMETER: PARAMETER, HOME: done.paths.state, ESOPT_MODEL_CACHE: join(done.paths.state, 'models') });
    // Root-only, since it holds the token.
    expect(statSync(done.paths.envFile).mode & 0o777).toBe(0o600);
    const unit = readFileSync(done.service!.unit, 'utf8');
    expect(unit).toContain('TimeoutStopSec=1020\n');
    expect(unit).toContain('Restart=always\n');
    // The tree this checkout deploys, with its production dependencies: the unit's command loads.
    expect(readFileSync(join(done.paths.app, 'package-lock.json'), 'utf8')).toBe(readFileSync('package-lock.json', 'utf8'));
    expect(existsSync(join(done.paths.app, 'node_modules/tsx/package.json'))).toBe(true);
    expect(existsSync(join(done.paths.app, 'node_modules/vitest'))).toBe(false);
    // The service runs as its own unprivileged user, in a hardened unit.
    const user = done.service!.user;
    expect(user.name).toBe(SERVICE_USER);
    expect(user.uid).not.toBe(0);
    expect(unit).toContain(`User=${SERVICE_USER}\n`);
    for (const line of ['NoNewPrivileges=yes', 'ProtectSystem=strict', 'ProtectHome=yes', 'PrivateTmp=yes', 'CapabilityBoundingSet=', `ReadWritePaths=${done.paths.state}`]) expect(unit).toContain(`${line}\n`);
    expect(statSync(done.paths.state)).toMatchObject({ uid: user.uid, gid: user.gid });
    expect(statSync(done.paths.state).mode & 0o777).toBe(0o700);
    // As that user: the unit's command loads from the root-owned app, the state directory takes writes, the app
    // and the env file do not (systemd reads the env file as root, before it drops to the user).
    const [node, ...args] = done.service!.command;
    const asUser = { uid: user.uid, gid: user.gid, encoding: 'utf8' as const };
    const help = spawnSync(node, [...args.slice(0, 2), '--help'], { ...asUser, cwd: done.service!.cwd, env: { ...process.env, ...done.service!.env } });
    expect(help.stdout + help.stderr).toContain('esopt trainer-box --public-url URL');
    const tryWrite = (path: string) => spawnSync(node, ['-e', `require('node:fs').writeFileSync(${JSON.stringify(path)}, 'x')`], asUser).status;
    expect(tryWrite(join(done.paths.state, 'probe'))).toBe(0);
    expect(tryWrite(join(done.paths.app, 'probe'))).not.toBe(0);
    expect(tryWrite(join(done.paths.app, 'trainer/cli/bin.js'))).not.toBe(0);
    expect(spawnSync(node, ['-e', `require('node:fs').readFileSync(${JSON.stringify(done.paths.envFile)})`], asUser).status).not.toBe(0);
    // Every step reported, and the token nowhere in what the bucket holds.
    for (const step of ['packages', 'node', 'artifact', 'unpack', 'dependencies', 'token', 'user', 'service']) expect(done.log).toContain(`box boot: step ${step}\n`);
    expect(JSON.stringify(done.state)).not.toContain(TOKEN);
    expect(done.replaced.map((r) => r.step)).toEqual(['packages', 'node', 'user', 'service (start)']);
    console.log(`real artifact install: ${done.durationMs} ms`);
  }, 600_000);

  it('fails loudly on a wrong artifact hash: `failed` at step artifact with the check in the log tail, and a non-zero exit', async () => {
    await pointTo({ key: artifact.key, sha256: '0'.repeat(64) });
    const done = await rehearseBoxInstall({ root: emptyRoot(), variables: variables(), ...common(), npmCiStep: 'true' }).finally(() => pointTo(artifact));
    expect(done.exitCode).not.toBe(0);
    expect(done.state).toMatchObject({ step: 'artifact', status: 'failed' });
    expect(done.state?.error).toMatch(/^step artifact failed \(exit 1\): .*sha256sum --check/);
    expect(done.state?.log.some((l) => /esopt\.tgz: FAILED/.test(l))).toBe(true);
    expect(done.service).toBeNull();
    expect(existsSync(done.paths.app)).toBe(false);
  });

  it('retries the token read with backoff, then fails at step token without a token in the state', async () => {
    const done = await rehearseBoxInstall({ root: emptyRoot(), variables: variables({ ESOPT_BOOT_TOKEN_PARAMETER: '/esopt/rehearsal/missing' }), ...common(), npmCiStep: 'true' });
    expect(done.exitCode).not.toBe(0);
    expect(done.state).toMatchObject({ step: 'token', status: 'failed' });
    const log = done.state!.log.join('\n');
    expect(log).toContain('ParameterNotFound');
    expect(log).toMatch(/attempt 1 failed \(exit 1\), again in 0\.05s: aws ssm get-parameter/);
    expect(log).toMatch(/attempt 2 failed \(exit 1\), again in 0\.1s: aws ssm get-parameter/);
    expect(log).toMatch(/gave up after 3 attempts \(exit 1\): aws ssm get-parameter/);
    expect(existsSync(done.paths.envFile)).toBe(false);
  });

  it('a step that fails twice then succeeds is retried and the boot ends `ready`; a token that reaches the log is redacted', async () => {
    const counter = join(scratch, 'npm-attempts');
    const stub = join(scratch, 'flaky-npm-ci.sh');
    writeFileSync(stub, `#!/bin/bash\nn=$(( $(cat "${counter}" 2>/dev/null || echo 0) + 1 ))\necho $n > "${counter}"\necho "npm ci attempt $n"\n[ "$n" -ge 3 ]\n`, { mode: 0o755 });
    // A unit start that prints the env file: the state must still not hold the token.
    const done = await rehearseBoxInstall({ root: emptyRoot(), variables: variables({ ESOPT_BOOT_BOX: 'replica-1', ESOPT_BOOT_SERVICE: 'esopt-replica-box' }), ...common(), npmCiStep: stub, env: { ESOPT_BOOT_START_STEP: 'cat "$ESOPT_BOOT_ENV_FILE"; echo "token is $TOKEN"' } });
    expect(done.exitCode, done.log).toBe(0);
    expect(readFileSync(counter, 'utf8').trim()).toBe('3');
    expect(done.state).toMatchObject({ box: 'replica-1', step: 'ready', status: 'ready' });
    expect(done.log).toMatch(/attempt 1 failed \(exit 1\), again in 0\.05s: .*flaky-npm-ci\.sh\nnpm ci attempt 2\nbox boot: attempt 2 failed/);
    // The log on the box has it (root-only, as /etc/esopt.env); the bucket's copy does not.
    expect(done.log).toContain(TOKEN);
    expect(JSON.stringify(done.state)).not.toContain(TOKEN);
    expect(done.state!.log).toContain('ESOPT_TOKEN=[redacted]');
    expect(done.state!.log).toContain('token is [redacted]');
    expect(await store.get(keys.boxBoot('replica-1'))).not.toBeNull();
  }, 180_000);

  it('before each service start, installs a newly deployed artifact whole; keeps the installed one when the new one fails its check', async () => {
    const vars = variables({ ESOPT_BOOT_BOX: 'replica-2', ESOPT_BOOT_SERVICE: 'esopt-replica-box' });
    const box = await rehearseBoxInstall({ root: emptyRoot(), variables: vars, ...common(), npmCiStep: 'true' });
    expect(box.exitCode, box.log).toBe(0);
    expect(readFileSync(join(box.paths.app, '.artifact-sha256'), 'utf8').trim()).toBe(artifact.sha256);
    const unit = readFileSync(box.service!.unit, 'utf8');
    expect(unit).toContain(`ExecStartPre=+/bin/bash ${box.paths.work}/box-boot.sh update ${box.paths.work}/boot-variables.sh\n`);
    const envLines = () => readFileSync(box.paths.envFile, 'utf8').trim().split('\n');
    try {
      // The pointer unchanged: nothing to do, the service starts on what is installed.
      const same = await rehearseBoxUpdate(box, vars, s3.endpoint);
      expect(same.exitCode).toBe(0);
      expect(same.log).toContain(`artifact ${artifact.sha256} is installed already`);
      expect(same.state).toMatchObject({ status: 'ready', artifactSha256: artifact.sha256 });

      // A deploy of new code: downloaded, checked, swapped in whole; the service is told which it runs.
      const next = await markerArtifact('next');
      await store.put(next.key, next.bytes);
      await pointTo(next);
      const updated = await rehearseBoxUpdate(box, vars, s3.endpoint);
      expect(updated.exitCode, updated.log).toBe(0);
      expect(readFileSync(join(box.paths.app, 'marker.txt'), 'utf8')).toBe('next');
      expect(existsSync(join(box.paths.app, 'package.json'))).toBe(false);
      expect(readFileSync(join(box.paths.app, '.artifact-sha256'), 'utf8').trim()).toBe(next.sha256);
      expect(envLines()).toContain(`ESOPT_ARTIFACT_SHA256=${next.sha256}`);
      expect(envLines()).toContain(`ESOPT_TOKEN=${TOKEN}`);
      expect(statSync(box.paths.envFile).mode & 0o777).toBe(0o600);
      expect(updated.state).toMatchObject({ box: 'replica-2', status: 'ready', artifactSha256: next.sha256 });

      // A deploy whose artifact fails its check: the installed tree stays, the box starts on it, says why, and skips that one.
      const broken = await markerArtifact('broken');
      await store.put(broken.key, Buffer.from('not the bytes the pointer hashed'));
      await pointTo(broken);
      const refused = await rehearseBoxUpdate(box, vars, s3.endpoint);
      expect(refused.exitCode).toBe(0);
      expect(readFileSync(join(box.paths.app, 'marker.txt'), 'utf8')).toBe('next');
      expect(envLines()).toContain(`ESOPT_ARTIFACT_SHA256=${next.sha256}`);
      expect(envLines()).toContain(`ESOPT_ARTIFACT_SKIP=${broken.sha256}`);
      expect(refused.state).toMatchObject({ step: 'update', status: 'failed', artifactSha256: next.sha256 });
      expect(refused.state?.error).toBe(`the update to artifact ${broken.sha256} failed; the box runs on ${next.sha256} (see the log)`);
      expect(refused.log).toContain('esopt.tgz: FAILED');
      expect(JSON.stringify(refused.state)).not.toContain(TOKEN);
    } finally {
      await pointTo(artifact);
    }
  }, 180_000);
});
