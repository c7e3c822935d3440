import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { Id, RunConfig } from '../../../shared/schemas/index.ts';
import { FsObjectStore } from '../../../shared/store/fs.ts';
import { runEmbedded } from '../../loop/embedded-run.ts';
import { stopAtFromEnv } from '../../loop/fault-points.ts';
import { progressBar, silentProgress } from '../../loop/progress.ts';
import { readRunConfig } from '../../loop/training.ts';
import { flag, parseFlags } from '../args.ts';
import type { Command, CommandIo } from '../command.ts';
import { UsageError } from '../usage-error.ts';

/** A run config from a JSON file; a bad one is a UsageError listing every failing field path. */
export function readConfigFile(path: string): RunConfig {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new UsageError(`--config: cannot read ${path}: ${(err as Error).message}`);
  }
  const r = RunConfig.safeParse(json);
  if (!r.success) throw new UsageError(`--config: ${path} is not a valid run config:\n${z.prettifyError(r.error)}`);
  return r.data;
}

function defaultRunId(config: RunConfig): string {
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*$/, '').replace('T', '-');
  return `${config.name ?? config.environment.name}-${stamp}`;
}

/** Shared by `train` and `start`: run (or resume) one embedded training run and print where its results are. */
export async function trainCommand(argv: string[], io: CommandIo): Promise<number> {
  const p = parseFlags(argv, { config: { type: 'string' }, resume: { type: 'string' }, run: { type: 'string' }, store: { type: 'string', default: '.esopt/store' } });
  const storeRoot = flag(p.values, 'store', z.string().min(1));
  if ((p.values.config === undefined) === (p.values.resume === undefined)) throw new UsageError('give exactly one of --config FILE or --resume RUN');
  let config: RunConfig;
  let run: string;
  if (p.values.resume !== undefined) {
    run = flag(p.values, 'resume', Id);
    const stored = await readRunConfig(new FsObjectStore(storeRoot), run);
    if (!stored) throw new UsageError(`--resume: no run ${run} in ${storeRoot} (is --store right?)`);
    config = stored;
  } else {
    config = readConfigFile(flag(p.values, 'config', z.string().min(1)));
    run = p.values.run === undefined ? defaultRunId(config) : flag(p.values, 'run', Id);
  }
  const { report } = await runEmbedded({
    config,
    run,
    storeRoot,
    progress: p.json ? silentProgress : progressBar(config.iterations),
    token: process.env.ESOPT_TOKEN || undefined,
    faults: stopAtFromEnv(process.env.ESOPT_STOP_AT),
  });
  if (p.json) {
    io.stdout(JSON.stringify(report));
  } else {
    const first = report.evaluationFirst;
    const last = report.evaluationLast;
    const pct = (e: typeof first) => (e ? `${(e.successRate * 100).toFixed(1)}% [${(e.interval.low * 100).toFixed(1)}, ${(e.interval.high * 100).toFixed(1)}] at θ_${e.iteration}` : 'n/a');
    io.stdout(
      [
        `run ${report.run}: ${report.iterations} iterations, θ ${report.thetaHash}`,
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
  summary: 'run ES training end to end on this machine (or resume a run)',
  usage: 'esopt train (--config configs/<name>.json [--run ID] | --resume RUN) [--store DIR] [--json]',
  run: trainCommand,
};
