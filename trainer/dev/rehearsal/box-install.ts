/**
 * A box's install, rehearsed: runs trainer/cloud/box/box-boot.sh (the text each box's user data carries) into
 * an empty directory against s3rver and the local SSM stand-in, and returns what systemd would then run
 * (the unit's command line, working directory and environment file), the boot state the script wrote to
 * the bucket, and the steps replaced because they need the internet or the host.
 */
import { execFileSync, spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { keys } from '../../../shared/keys.ts';
import { BoxBootState } from '../../../shared/schemas/box-boot.ts';

export const BOX_BOOT_SCRIPT = fileURLToPath(new URL('../../cloud/box/box-boot.sh', import.meta.url));
const STAND_IN = fileURLToPath(new URL('./aws-cli-stand-in.ts', import.meta.url));

/** What the user data sets before the script (sst.config.ts sets exactly these). */
export interface BoxBootVariables {
  ESOPT_BOOT_BOX: string;
  ESOPT_BOOT_REGION: string;
  ESOPT_BOOT_BUCKET: string;
  ESOPT_BOOT_TOKEN_PARAMETER: string;
  ESOPT_BOOT_EPISODE_FUNCTION: string;
  ESOPT_BOOT_SERVICE: string;
  ESOPT_BOOT_DESCRIPTION: string;
  /** The command after `node trainer/cli/bin.js`, e.g. `trainer-box --host 0.0.0.0 --port 8080 --public-url … --provider cpu`. */
  ESOPT_BOOT_ARGS: string;
  ESOPT_BOOT_PROVIDER: 'cpu' | 'cuda';
  ESOPT_BOOT_LOG_GROUP: string;
  ESOPT_BOOT_STOP_TIMEOUT_S: string;
}

/** The bash assignments (`ESOPT_BOOT_X='value'`) a box's user data sets before its boot script. */
export function bootVariables(userData: string): BoxBootVariables {
  const found = Object.fromEntries([...userData.matchAll(/^(ESOPT_BOOT_[A-Z0-9_]+)='([^']*)'$/gm)].map((m) => [m[1]!, m[2]!]));
  return found as unknown as BoxBootVariables;
}

export interface ReplacedStep {
  step: string;
  /** What the box does. */
  deployed: string;
  /** What the rehearsal does instead, and why. */
  rehearsal: string;
}

/** The steps a rehearsal replaces: the box's own host (apt, systemd) and the internet (nodejs.org). */
export const REPLACED_STEPS: ReplacedStep[] = [
  { step: 'packages', deployed: 'apt-get install awscli (unless `aws` is on PATH), retried', rehearsal: 'nothing: an `aws` stand-in on PATH (trainer/dev/rehearsal/aws-cli-stand-in.ts) serves the script\'s s3 cp and ssm get-parameter through the AWS SDK against s3rver and the local SSM; apt needs the internet and root on a Debian host' },
  { step: 'node', deployed: 'the official Node 22.21.1 tarball from nodejs.org, checked by its SHA-256, unpacked to ESOPT_BOOT_NODE_DIR', rehearsal: "this machine's node and npm linked into ESOPT_BOOT_NODE_DIR/bin: the download needs the internet" },
  { step: 'user', deployed: 'useradd --system esopt (the unprivileged user the unit runs as), unless it exists', rehearsal: "the existing unprivileged user `nobody`: adding a user would change this machine" },
  { step: 'service (start)', deployed: 'systemctl daemon-reload && systemctl enable --now <unit>', rehearsal: 'the unit file is written as on the box and read back into the command line and environment returned here, which the caller starts: there is no systemd to start it' },
];

export interface BoxInstallOptions {
  /** An empty directory: the app, env file, unit, log and work files go under it. */
  root: string;
  variables: BoxBootVariables;
  s3Endpoint: string;
  ssmEndpoint: string;
  /** Attempts per network step and the first wait (seconds); the box uses 6 and 2. */
  attempts?: number;
  backoffS?: number;
  /** A command instead of `npm ci --omit=dev --prefer-offline …` (tests of failures that need no install). */
  npmCiStep?: string;
  /** Extra environment for the script (e.g. a stub's counter file). */
  env?: Record<string, string>;
  timeoutMs?: number;
}

export interface BoxInstall {
  exitCode: number;
  /** The state the script last wrote to the bucket (null: none was written). */
  state: BoxBootState | null;
  /** The boot log on the "box". */
  log: string;
  /** What systemd would run, when the boot reached the unit. */
  service: { command: string[]; cwd: string; env: Record<string, string>; unit: string; user: { name: string; uid: number; gid: number } } | null;
  paths: { app: string; envFile: string; unitDir: string; log: string; nodeDir: string; state: string; work: string };
  /** The environment the script ran with, less its ESOPT_BOOT_* (which it saved for `update`). */
  boxEnv: Record<string, string>;
  replaced: ReplacedStep[];
  durationMs: number;
}

/** The unprivileged user the rehearsed unit runs as (see REPLACED_STEPS). */
export const SERVICE_USER = 'nobody';

/** A user's uid and primary gid, as `id` prints them. */
function userIds(user: string): { uid: number; gid: number } {
  const id = (flag: string) => Number(execFileSync('id', [flag, user], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

let bundled: Promise<string> | null = null;

/**
 * The stand-in and the SDK clients it imports as one ESM file, built once per process from this checkout (the
 * box's own node_modules does not exist yet): a boot calls `aws` a dozen times, and starting each under tsx
 * costs about twice as long as loading the bundle.
 */
function standInBundle(): Promise<string> {
  bundled ??= (async () => {
    const { build } = await import('esbuild');
    const dir = await mkdtemp(join(tmpdir(), 'esopt-aws-stand-in-'));
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    const outfile = join(dir, 'aws.mjs');
    // the SDK's CommonJS parts call require(), which an ESM bundle must be given
    await build({ entryPoints: [STAND_IN], bundle: true, platform: 'node', format: 'esm', outfile, logLevel: 'warning', banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" } });
    return outfile;
  })();
  return bundled;
}

/** KEY=VALUE lines, as systemd's EnvironmentFile reads the ones the script writes. */
function parseEnvFile(text: string): Record<string, string> {
  return Object.fromEntries(text.split('\n').filter((l) => /^[A-Z_][A-Z0-9_]*=/.test(l)).map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]));
}

export async function rehearseBoxInstall(o: BoxInstallOptions): Promise<BoxInstall> {
  const paths = { app: join(o.root, 'opt/esopt'), envFile: join(o.root, 'etc/esopt.env'), unitDir: join(o.root, 'etc/systemd/system'), log: join(o.root, 'var/log/esopt-boot.log'), nodeDir: join(o.root, 'opt/node'), state: join(o.root, 'var/lib/esopt'), work: join(o.root, 'var/lib/esopt-boot') };
  // A box's / is world-traversable: the service's user reaches the app and its state directory through it.
  await chmod(o.root, 0o755);
  const bin = join(o.root, 'stand-ins');
  await mkdir(bin, { recursive: true });
  await writeFile(join(bin, 'aws'), `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(await standInBundle())} "$@"\n`);
  await chmod(join(bin, 'aws'), 0o755);
  const npm = join(dirname(process.execPath), 'npm');
  const env: Record<string, string> = {
    ...(Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('ESOPT_') && !k.startsWith('AWS_') && !k.startsWith('npm_'))) as Record<string, string>),
    ...o.variables,
    PATH: `${bin}:${process.env.PATH ?? ''}`,
    ESOPT_BOOT_APP_DIR: paths.app,
    ESOPT_BOOT_ENV_FILE: paths.envFile,
    ESOPT_BOOT_UNIT_DIR: paths.unitDir,
    ESOPT_BOOT_WORK_DIR: paths.work,
    ESOPT_BOOT_LOG: paths.log,
    ESOPT_BOOT_NODE_DIR: paths.nodeDir,
    ESOPT_BOOT_ATTEMPTS: String(o.attempts ?? 3),
    ESOPT_BOOT_BACKOFF_S: String(o.backoffS ?? 0.05),
    ESOPT_BOOT_PACKAGES_STEP: ':',
    // node copied, not linked: the service's user must be able to run it wherever this machine keeps it
    ESOPT_BOOT_NODE_STEP: `mkdir -p "$ESOPT_BOOT_NODE_DIR/bin" && cp ${JSON.stringify(process.execPath)} "$ESOPT_BOOT_NODE_DIR/bin/node" && ln -sf "$(readlink -f ${JSON.stringify(npm)})" "$ESOPT_BOOT_NODE_DIR/bin/npm"`,
    ESOPT_BOOT_STATE_DIR: paths.state,
    ESOPT_BOOT_SERVICE_USER: SERVICE_USER,
    ESOPT_BOOT_USER_STEP: 'id -u "$ESOPT_BOOT_SERVICE_USER"',
    ESOPT_BOOT_START_STEP: ':',
    ...(o.npmCiStep ? { ESOPT_BOOT_NPM_CI_STEP: o.npmCiStep } : {}),
    AWS_ENDPOINT_URL_S3: o.s3Endpoint,
    AWS_ENDPOINT_URL_SSM: o.ssmEndpoint,
    // s3rver's fixed development key pair; the local SSM accepts any.
    AWS_ACCESS_KEY_ID: 'S3RVER',
    AWS_SECRET_ACCESS_KEY: 'S3RVER',
    AWS_REGION: o.variables.ESOPT_BOOT_REGION,
    ...o.env,
  };
  const started = Date.now();
  const exitCode = await new Promise<number>((resolve, reject) => {
    const child = spawn('bash', [BOX_BOOT_SCRIPT], { env, stdio: ['ignore', 'ignore', 'inherit'] });
    const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs ?? 300_000);
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve(code ?? (signal ? 128 : 1));
    });
  });
  const durationMs = Date.now() - started;
  const log = await readFile(paths.log, 'utf8').catch(() => '');
  const state = await readState(o.s3Endpoint, o.variables.ESOPT_BOOT_BUCKET, o.variables.ESOPT_BOOT_BOX);
  const unit = join(paths.unitDir, `${o.variables.ESOPT_BOOT_SERVICE}.service`);
  const unitText = await readFile(unit, 'utf8').catch(() => null);
  let service: BoxInstall['service'] = null;
  if (unitText !== null && exitCode === 0) {
    const field = (name: string) => new RegExp(`^${name}=(.*)$`, 'm').exec(unitText)?.[1] ?? '';
    const unitEnv = Object.fromEntries(field('Environment').split(/\s+/).filter(Boolean).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
    const user = field('User');
    const ids = userIds(user);
    service = { command: field('ExecStart').split(/\s+/).filter(Boolean), cwd: field('WorkingDirectory'), env: { ...parseEnvFile(await readFile(field('EnvironmentFile'), 'utf8')), ...unitEnv }, unit, user: { name: user, ...ids } };
  }
  const boxEnv = Object.fromEntries(Object.entries(env).filter(([k]) => !k.startsWith('ESOPT_BOOT_')));
  return { exitCode, state, log, service, paths, boxEnv, replaced: REPLACED_STEPS, durationMs };
}

/**
 * What the unit's ExecStartPre runs before each service start (`box-boot.sh update VARIABLES`), on a box a
 * rehearsed boot installed: the script and variables it saved, on the same host. Resolves with the exit
 * code, the state in the bucket, and the log.
 */
export async function rehearseBoxUpdate(box: BoxInstall, variables: BoxBootVariables, s3Endpoint: string): Promise<{ exitCode: number; state: BoxBootState | null; log: string }> {
  const exitCode = await new Promise<number>((resolve, reject) => {
    const child = spawn('bash', [join(box.paths.work, 'box-boot.sh'), 'update', join(box.paths.work, 'boot-variables.sh')], { env: box.boxEnv, stdio: ['ignore', 'ignore', 'inherit'] });
    child.on('error', reject);
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
  const log = await readFile(box.paths.log, 'utf8').catch(() => '');
  return { exitCode, state: await readState(s3Endpoint, variables.ESOPT_BOOT_BUCKET, variables.ESOPT_BOOT_BOX), log };
}

async function readState(endpoint: string, bucket: string, box: string): Promise<BoxBootState | null> {
  const { S3Client, GetObjectCommand } = await import('@aws-sdk/client-s3');
  const client = new S3Client({ region: 'us-east-1', endpoint, forcePathStyle: true, credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } });
  try {
    const res = await client.send(new GetObjectCommand({ Bucket: bucket, Key: keys.boxBoot(box) }));
    return BoxBootState.parse(JSON.parse(await res.Body!.transformToString()));
  } catch (err) {
    if ((err as { name?: string }).name === 'NoSuchKey') return null;
    throw err;
  } finally {
    client.destroy();
  }
}
