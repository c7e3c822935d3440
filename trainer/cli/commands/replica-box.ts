import { z } from 'zod';
import { keys } from '../../../shared/keys.ts';
import { Id } from '../../../shared/schemas/index.ts';
import { cloudStackFromEnv, openCloudStore } from '../../assembly/cloud-stack.ts';
import { ReplicaBox } from '../../cloud/box/replica-box.ts';
import { tlsFor } from '../../assembly/wirings.ts';
import { flag, parseFlags } from '../argv/args.ts';
import { servingFlags, servingFromFlags } from '../argv/serving-flags.ts';
import type { Command, CommandIo } from '../argv/command.ts';
import { UsageError } from '../argv/usage-error.ts';
import { ExecutionProvider } from '../../../shared/execution-provider.ts';
import { boxLogger } from '../../cloud/box/box-logger.ts';
import { TokenFollower } from '../../serving/token-follower.ts';
import { SsmSecretStore } from '../../../shared/secrets/ssm.ts';
import { SecretName } from '../../../shared/schemas/index.ts';

/**
 * `esopt replica-box`: a deployed replica box's service (sst.config.ts, ESOPT_REPLICAS > 1). Follows the
 * run the coordinator box trains (trainer/cloud/box/replica-box.ts), serving its members on --host/--port,
 * where the Episode function reaches it at --public-url (https: TLS, the certificate announced under the run).
 */
async function run(argv: string[], io: CommandIo): Promise<number> {
  const p = parseFlags(argv, {
    id: { type: 'string' },
    ...servingFlags,
    'poll-ms': { type: 'string' },
    provider: { type: 'string' },
    once: { type: 'boolean' },
    'token-refresh-s': { type: 'string' },
    'token-grace-s': { type: 'string' },
  });
  const id = flag(p.values, 'id', Id);
  const serving = servingFromFlags(p, { host: '127.0.0.1', port: 8080, publicUrl: 'required' });
  const publicUrl = serving.publicUrl!;
  const host = serving.host!;
  const port = serving.port!;
  const pollMs = flag(p.values, 'poll-ms', z.coerce.number().int().min(50).max(600_000).default(5000));
  const executionProvider = flag(p.values, 'provider', ExecutionProvider.default('cpu'));
  const token = process.env.ESOPT_TOKEN;
  if (!token) throw new UsageError("ESOPT_TOKEN is not set (the stack's TrainerToken secret, which the Episode function sends as its ESOPT_TRAINER_TOKEN)");
  // The stack's token parameter, followed as the trainer box follows it (docs/CLOUD.md, "Rotating the token").
  const parameter = SecretName.optional().safeParse(process.env.ESOPT_TOKEN_PARAMETER || undefined);
  if (!parameter.success) throw new UsageError(`ESOPT_TOKEN_PARAMETER: ${parameter.error.issues[0]!.message}`);
  const refreshS = flag(p.values, 'token-refresh-s', z.coerce.number().int().min(1).max(86_400).default(60));
  const graceS = flag(p.values, 'token-grace-s', z.coerce.number().int().min(0).max(7 * 86_400).default(600));
  let store;
  let region: string;
  try {
    const cloud = cloudStackFromEnv(process.env);
    store = openCloudStore(cloud);
    region = cloud.region;
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  // Logs go to stderr (stdout is the command's answer, --json) and to CloudWatch where the stack names a group.
  const logger = boxLogger('esopt-replica-box', process.env);
  const secrets = parameter.data ? new SsmSecretStore({ region }) : null;
  const follower = parameter.data && secrets ? new TokenFollower({ initial: token, read: () => secrets.get(parameter.data!), refreshMs: refreshS * 1000, graceMs: graceS * 1000, log: logger.log }) : null;
  follower?.start();
  const box = new ReplicaBox({ store, id, publicUrl, host, port, token, tls: await tlsFor(publicUrl), pollMs, executionProvider, log: logger.log, ...(follower ? { tokens: follower } : {}) });
  try {
    if (p.values.once) {
      const followed = await box.pollOnce();
      io.stdout(p.json ? JSON.stringify({ followed }) : followed ? `followed run ${followed}` : 'no run to follow');
      return 0;
    }
    io.stderr(`replica box ${id} following the coordinator box's run (${keys.activeRun()}) every ${pollMs} ms; inference on ${host}:${port} (${publicUrl})`);
    box.start();
    await new Promise<void>((resolve) => {
      process.once('SIGINT', resolve);
      process.once('SIGTERM', resolve);
    });
    return 0;
  } finally {
    await box.close();
    follower?.close();
    secrets?.destroy();
    store.destroy();
    await logger.close();
  }
}

export const command: Command = {
  name: 'replica-box',
  usage:
    'esopt replica-box --id ID --public-url URL [--host H] [--port P] [--poll-ms N] [--provider cpu|cuda|webgpu] [--once] [--json]\n' +
    '  the stack from ESOPT_BUCKET, ESOPT_EPISODE_FUNCTION, AWS_REGION (overrides: AWS_ENDPOINT_URL_S3); needs ESOPT_TOKEN; ESOPT_LOG_GROUP/_STREAM: ship the log to CloudWatch\n' +
    '  ESOPT_TOKEN_PARAMETER: follow the token in this SSM parameter, read every --token-refresh-s (60); the old token is accepted --token-grace-s (600) after a change\n' +
    '  follows the run the coordinator box trains (trainer/active-run.json) as trainer replica ID; --once: follow the active run, if any, to its end\n' +
    '  an https --public-url serves TLS with a certificate made at start and announced with the address under the run, which the Episode function pins',
  run,
};
