import { z } from 'zod';
import { pinModelName, UnknownModelError } from '../../../shared/model-catalog.ts';
import { Id, RunConfig } from '../../../shared/schemas/index.ts';
import { cloudStackFromEnv } from '../../assembly/cloud-stack.ts';
import { runEmbedded } from '../../assembly/run.ts';
import { stopAtFromEnv } from '../../training/loop/index.ts';
import { progressBar, silentProgress } from '../../training/loop/index.ts';
import { cloudWiring, embeddedWiring, type RunWiring } from '../../assembly/wirings.ts';
import { readRunConfig } from '../../training/loop/index.ts';
import { pinRunInstructions, pinRunSuite } from '../../training/loop/index.ts';
import { UnknownInstructionsError } from '../../../shared/instructions-catalog.ts';
import { UnknownSuiteError } from '../../../environments/task-suites/suite-catalog.ts';
import { flag, parseFlags } from '../argv/args.ts';
import { storeFlags } from '../argv/store-flags.ts';
import { servingFlags, servingFromFlags } from '../argv/serving-flags.ts';
import type { Command, CommandIo } from '../argv/command.ts';
import { UsageError } from '../argv/usage-error.ts';
import { spawnLocalReplicas } from '../../jobs/local-replicas.ts';
import { keys } from '../../../shared/keys.ts';
import { writeJson } from '../../../shared/store/json.ts';
import { extendRunConfig } from '../../../shared/run-extension.ts';
import { readCommittedUpdates } from '../../../functions/http-api/run-reader.ts';
import { extensionFlags, extensionFromFlags, extensionUsage, flagOfPath } from '../argv/extension-flags.ts';
import { readConfigFile } from '../argv/config-file.ts';

function defaultRunId(config: RunConfig): string {
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*$/, '').replace('T', '-');
  return `${config.name ?? config.environment.name}-${stamp}`;
}

/**
 * The embedded default over --store, or with --cloud the deployed stack the environment names
 * (cloud-site.ts), whose Episode function reaches the inference server at --public-url with the bearer
 * token ESOPT_TOKEN. Every missing piece is a UsageError naming the flag or variable.
 */
function chooseWiring(p: ReturnType<typeof parseFlags>, token: string | undefined): RunWiring {
  if (!p.values.cloud) {
    servingFromFlags(p, { publicUrl: { refused: 'is for --cloud runs (local workers reach the server on loopback)' } });
    return embeddedWiring(p.values.store === undefined ? '.esopt/store' : flag(p.values, 'store', z.string().min(1)), token);
  }
  if (p.values.store !== undefined) throw new UsageError('--store is for embedded runs; a --cloud run keeps its records in ESOPT_BUCKET');
  const publicUrl = servingFromFlags(p, { publicUrl: 'required' }).publicUrl!;
  if (!token) throw new UsageError('--cloud: ESOPT_TOKEN is not set (the bearer token the Episode function sends as its ESOPT_TRAINER_TOKEN: the stack\'s TrainerToken secret)');
  let cloud;
  try {
    cloud = cloudStackFromEnv(process.env);
  } catch (err) {
    throw new UsageError(`--cloud: ${(err as Error).message}`);
  }
  return cloudWiring(cloud, publicUrl);
}

/** Shared by `train` and `start`: run (or resume) one training run and print where its results are. */
export async function trainCommand(argv: string[], io: CommandIo): Promise<number> {
  const p = parseFlags(argv, {
    config: { type: 'string' },
    resume: { type: 'string' },
    run: { type: 'string' },
    ...storeFlags,
    ...servingFlags,
    replicas: { type: 'string' },
    ...extensionFlags,
  });
  const replicaCount = p.values.replicas === undefined ? 1 : flag(p.values, 'replicas', z.coerce.number().int().min(1).max(64));
  if ((p.values.config === undefined) === (p.values.resume === undefined)) throw new UsageError('give exactly one of --config FILE or --resume RUN');
  const extension = extensionFromFlags(p.values);
  if (extension && p.values.resume === undefined) throw new UsageError('--iterations and the --max-* flags are for --resume RUN; a new run takes them from its --config file');
  const { host, port } = servingFromFlags(p, { publicUrl: 'optional' });
  const token = process.env.ESOPT_TOKEN || undefined;
  const choice = chooseWiring(p, token);
  let config: RunConfig;
  let run: string;
  let changes: string[] | undefined;
  try {
    if (p.values.resume !== undefined) {
      run = flag(p.values, 'resume', Id);
      const stored = await readRunConfig(choice.store, run);
      if (!stored) throw new UsageError(`--resume: no run ${run} in ${choice.where} (${p.values.cloud ? 'is ESOPT_BUCKET right?' : 'is --store right?'})`);
      config = stored;
      if (extension) {
        const extended = extendRunConfig(stored, extension, await readCommittedUpdates(choice.store, run));
        if (!extended.ok) throw new UsageError(`--resume ${run}: ${extended.issues.map((i) => `${flagOfPath(i.path)}: ${i.message}`).join('; ')}`);
        config = extended.config;
        changes = extended.changes;
        // The stored config is the run's: the loop resumes only with exactly the one in the store.
        if (changes.length) await writeJson(choice.store, keys.config(run), config);
        if (!p.json) io.stdout(`run ${run}: ${changes.length ? changes.join(', ') : 'nothing changed'} (its stored config)`);
      }
    } else {
      config = readConfigFile(flag(p.values, 'config', z.string().min(1)));
      run = p.values.run === undefined ? defaultRunId(config) : flag(p.values, 'run', Id);
      // A named model is pinned to its manifest now, so the stored config (and any resume) keeps this θ₀.
      if ('name' in config.model) {
        try {
          config = { ...config, model: await pinModelName(choice.store, config.model) };
        } catch (err) {
          if (err instanceof UnknownModelError) throw new UsageError(`--config: model.${err.field}: ${err.message} (in ${choice.where})`);
          throw err;
        }
      }
      // The same for a task suite: pinned now, so a later push under its name never changes the run's tasks.
      if (config.tasks.suite) {
        try {
          config = await pinRunSuite(choice.store, run, config);
        } catch (err) {
          if (err instanceof UnknownSuiteError) throw new UsageError(`--config: tasks.suite.${err.field}: ${err.message} (in ${choice.where})`);
          throw err;
        }
      }
      if (config.instructions) {
        try {
          config = await pinRunInstructions(choice.store, run, config);
        } catch (err) {
          if (err instanceof UnknownInstructionsError) throw new UsageError(`--config: instructions.${err.field}: ${err.message} (in ${choice.where})`);
          throw err;
        }
      }
    }
  } catch (err) {
    await choice.abandon();
    throw err;
  }
  if (replicaCount > 1 && config.policy !== 'model') throw new UsageError(`--replicas: replicas serve the model's members; this run's policy is ${config.policy}`);
  // Embedded: the other replicas are processes here on loopback; --cloud: the stack's replica boxes (esopt replica --cloud).
  const local = replicaCount > 1 && !p.values.cloud ? spawnLocalReplicas({ count: replicaCount - 1, run, storeRoot: choice.where }) : null;
  let report;
  try {
    // An https --public-url (the stack's trainerUrl) means TLS, as on the trainer box (assembly/wirings.ts).
    const { site, tls } = await choice.open(config).catch(async (err: unknown) => {
      await choice.abandon();
      throw err;
    });
    ({ report } = await runEmbedded({
      config,
      run,
      site,
      server: { host, port, tls },
      progress: p.json ? silentProgress : progressBar(config.iterations),
      token,
      faults: stopAtFromEnv(process.env.ESOPT_STOP_AT),
      ...(replicaCount > 1 ? { replicas: { syncTimeoutMs: Math.min(config.deadlineMs, 60_000), expected: replicaCount - 1, onLost: ({ iteration, replica }) => io.stderr(`replica ${replica} did not report θ before iteration ${iteration}: dropped until it catches up`) } } : {}),
    }));
  } finally {
    await local?.close();
  }
  if (p.json) {
    io.stdout(JSON.stringify(changes ? { ...report, changes } : report));
  } else {
    const first = report.evaluationFirst;
    const last = report.evaluationLast;
    const pct = (e: typeof first) => (e ? `${(e.successRate * 100).toFixed(1)}% [${(e.interval.low * 100).toFixed(1)}, ${(e.interval.high * 100).toFixed(1)}] at θ_${e.iteration}` : 'n/a');
    io.stdout(
      [
        `run ${report.run}: ${report.iterations} iterations, θ ${report.thetaHash}`,
        ...(report.stoppedBy ? [`stopped after iteration ${report.stoppedBy.afterIteration} at its ${report.stoppedBy.detail} (checkpointed: go on with --resume ${report.run} and a larger --max-cost-usd, --max-episodes or --max-hours)`] : []),
        `evaluation success: ${pct(first)} → ${pct(last)}`,
        `mean reward: ${report.rewardFirst ?? 'n/a'} → ${report.rewardLast ?? 'n/a'}`,
        `report: ${report.files.report}`,
        `curve:  ${report.files.curve}`,
      ].join('\n'),
    );
  }
  return 0;
}

export const command: Command = {
  name: 'train',
  usage:
    `esopt train (--config configs/<name>.json [--run ID] | --resume RUN ${extensionUsage}) [--store DIR | --cloud --public-url URL] [--host H] [--port P] [--replicas N] [--json]\n` +
    '  --resume RUN: go on from its checkpoint and log; --iterations N (its length in all) and --max-cost-usd/--max-episodes/--max-hours (none: no limit) update its stored config first\n' +
    '  --replicas N: the members\' inference over N trainer replicas (N−1 `esopt replica` processes here; with --cloud, the stack\'s replica boxes)\n' +
    '  --cloud: S3 store + Lambda fan-out from ESOPT_BUCKET, ESOPT_EPISODE_FUNCTION, AWS_REGION (overrides: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL_LAMBDA); needs ESOPT_TOKEN',
  run: trainCommand,
};
