import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { HorizonExperimentConfig } from '../../experiment/horizon-config.ts';
import { runHorizonExperiment } from '../../experiment/horizon.ts';
import { writeSummary } from '../../experiment/horizon-report.ts';
import { summarizeHorizon } from '../../experiment/horizon-summary.ts';
import { flag, parseFlags } from '../../command/args.ts';
import type { Command } from '../../command/command.ts';
import { UsageError } from '../../command/usage-error.ts';

export const command: Command = {
  name: 'experiment horizon',
  usage: 'esopt experiment horizon --config configs/experiment-horizon.json --out DIR [--store DIR] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, { config: { type: 'string' }, out: { type: 'string' }, store: { type: 'string', default: '.esopt/store' } });
    const path = flag(p.values, 'config', z.string().min(1));
    let json: unknown;
    try {
      json = JSON.parse(readFileSync(path, 'utf8'));
    } catch (err) {
      throw new UsageError(`--config: cannot read ${path}: ${(err as Error).message}`);
    }
    const parsed = HorizonExperimentConfig.safeParse(json);
    if (!parsed.success) throw new UsageError(`--config: ${path} is not a valid horizon experiment config:\n${z.prettifyError(parsed.error)}`);
    const out = flag(p.values, 'out', z.string().min(1));
    const cells = await runHorizonExperiment(parsed.data, {
      out,
      storeRoot: flag(p.values, 'store', z.string().min(1)),
      log: (s) => io.stderr(`${new Date().toISOString()} ${s}`),
      onCell: (done) => writeSummary(out, done),
    });
    const summary = summarizeHorizon(cells);
    io.stdout(p.json ? JSON.stringify(summary) : summary.table);
    return 0;
  },
};
