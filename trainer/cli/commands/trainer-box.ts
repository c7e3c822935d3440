import { z } from 'zod';
import { cloudStackFromEnv } from '../../assembly/cloud-stack.ts';
import { tlsFor } from '../../assembly/wirings.ts';
import { TrainerBox } from '../../cloud/box/trainer-box.ts';
import { flag, parseFlags } from '../argv/args.ts';
import { servingFlags, servingFromFlags } from '../argv/serving-flags.ts';
import type { Command, CommandIo } from '../argv/command.ts';
import { UsageError } from '../argv/usage-error.ts';
import { ExecutionProvider } from '../../../shared/execution-provider.ts';
import { boxLogger } from '../../cloud/box/box-logger.ts';
import { instanceIdFromImds } from '../../cloud/box/instance-identity.ts';
import { Ec2Instance } from '../../../shared/boxes/ec2-instance.ts';
import { SecretName } from '../../../shared/schemas/index.ts';

/**
 * `esopt trainer-box`: the deployed trainer box's service. Polls the stack's bucket for the runs and
 * evaluations the Api function queued, claims each once and runs it here (trainer/cloud/box/trainer-box.ts),
 * serving inference on --host/--port where the Episode function reaches it at --public-url (https: TLS, pinned).
 */
async function run(argv: string[], io: CommandIo): Promise<number> {
  const p = parseFlags(argv, {
    ...servingFlags,
    'poll-ms': { type: 'string' },
    provider: { type: 'string' },
    once: { type: 'boolean' },
    replicas: { type: 'string' },
    'token-refresh-s': { type: 'string' },
    'token-grace-s': { type: 'string' },
    'idle-minutes': { type: 'string' },
  });
  // Loopback unless told otherwise: the stack's unit passes --host 0.0.0.0 behind its security group.
  const serving = servingFromFlags(p, { host: '127.0.0.1', port: 8080, publicUrl: 'required' });
  const publicUrl = serving.publicUrl!;
  const host = serving.host!;
  const port = serving.port!;
  const pollMs = flag(p.values, 'poll-ms', z.coerce.number().int().min(50).max(600_000).default(5000));
  const executionProvider = flag(p.values, 'provider', ExecutionProvider.default('cpu'));
  // The stack's trainer replicas, this box included: the others are replica boxes (esopt replica-box).
  const replicas = flag(p.values, 'replicas', z.coerce.number().int().min(1).max(64).default(1));
  const token = process.env.ESOPT_TOKEN;
  if (!token) throw new UsageError("ESOPT_TOKEN is not set (the stack's TrainerToken secret, which the Episode function sends as its ESOPT_TRAINER_TOKEN)");
  // The stack's token parameter, which the box follows after the token it started with (docs/CLOUD.md, "Rotating the token").
  const parameter = SecretName.optional().safeParse(process.env.ESOPT_TOKEN_PARAMETER || undefined);
  if (!parameter.success) throw new UsageError(`ESOPT_TOKEN_PARAMETER: ${parameter.error.issues[0]!.message}`);
  const refreshS = flag(p.values, 'token-refresh-s', z.coerce.number().int().min(1).max(86_400).default(60));
  const graceS = flag(p.values, 'token-grace-s', z.coerce.number().int().min(0).max(7 * 86_400).default(600));
  const idleMinutes = flag(p.values, 'idle-minutes', z.coerce.number().int().min(0).max(7 * 24 * 60).default(0));
  let cloud;
  try {
    cloud = cloudStackFromEnv(process.env);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  // An https public URL means TLS, its certificate published in the bucket for the Episode function to pin
  // (assembly/wirings.ts). Logs go to stderr (stdout is the command's answer, --json) and to CloudWatch where the stack names a group.
  const logger = boxLogger('esopt-trainer-box', process.env);
  const box = new TrainerBox({
    cloud,
    publicUrl,
    host,
    port,
    token,
    ...(parameter.data ? { tokenFollow: { parameter: parameter.data, refreshMs: refreshS * 1000, graceMs: graceS * 1000 } } : {}),
    pollMs,
    executionProvider,
    replicas,
    log: logger.log,
    tls: await tlsFor(publicUrl),
    artifactSha256: process.env.ESOPT_ARTIFACT_SHA256 || undefined,
    skipArtifactSha256: process.env.ESOPT_ARTIFACT_SKIP || undefined,
    // On EC2 the box stops its own instance (its role may stop that one alone); the Api starts it again.
    ...(idleMinutes > 0 ? { idleMinutes, stopSelf: () => stopThisInstance(cloud.region) } : {}),
  });
  if (p.values.once) {
    try {
      const ran = await box.pollOnce();
      io.stdout(p.json ? JSON.stringify({ ran }) : ran.length ? ran.map((w) => `ran ${w.kind} ${w.id}`).join('\n') : 'nothing queued');
    } finally {
      await box.close();
      await logger.close();
    }
    return 0;
  }
  io.stderr(`trainer box polling s3://${cloud.bucket}/queue/ every ${pollMs} ms; inference on ${host}:${port} (${publicUrl}); Ctrl-C stops after the iteration in flight`);
  box.start();
  // Ends on a signal, or when a new artifact is deployed and the run in flight is handed over: the unit
  // restarts the service, its start installs the new artifact (box-boot.sh update), and the run resumes.
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
    void box.handedOver.then((sha256) => {
      io.stderr(`a new artifact is deployed (${sha256}): handed over; exiting so the service restarts into it`);
      resolve();
    });
  });
  await box.close();
  await logger.close();
  return 0;
}

async function stopThisInstance(region: string): Promise<void> {
  const instance = new Ec2Instance({ instanceId: await instanceIdFromImds(), region });
  try {
    await instance.stop();
  } finally {
    instance.destroy();
  }
}

export const command: Command = {
  name: 'trainer-box',
  usage:
    'esopt trainer-box --public-url URL [--host H] [--port P] [--poll-ms N] [--provider cpu|cuda|webgpu] [--replicas N] [--token-refresh-s S] [--token-grace-s S] [--idle-minutes M] [--once] [--json]\n' +
    '  the stack from ESOPT_BUCKET, ESOPT_EPISODE_FUNCTION, AWS_REGION (overrides: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL_LAMBDA); needs ESOPT_TOKEN; ESOPT_LOG_GROUP/_STREAM: ship the log to CloudWatch\n' +
    '  ESOPT_ARTIFACT_SHA256: the artifact this box runs; when the stack\'s stack/artifact.json names another, the run in flight is handed over after its iteration and the command exits (the unit restarts into the new artifact)\n' +
    '  ESOPT_TOKEN_PARAMETER: follow the token in this SSM parameter, read every --token-refresh-s (60); the old token is accepted --token-grace-s (600) after a change\n' +
    '  --idle-minutes M: stop this EC2 instance after M minutes with nothing running or queued (0, the default: never)\n' +
    '  --once: claim and run what is queued now, then exit\n' +
    '  --replicas N: the stack\'s trainer replicas, this box included; each run names itself in trainer/active-run.json, which the N−1 replica boxes follow\n' +
    '  an https --public-url serves TLS with a certificate made at start and published in the bucket (trainer/certificate.json), which the Episode function pins',
  run,
};
