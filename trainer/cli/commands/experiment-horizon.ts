import { z } from 'zod';
import { TRAINED } from '../../studies/experiment/horizon-cell.ts';
import { HorizonExperimentConfig } from '../../studies/experiment/horizon-config.ts';
import { runHorizonExperiment } from '../../studies/experiment/horizon.ts';
import { readCells, writeSummary } from '../../studies/experiment/horizon-report.ts';
import { summarizeHorizon } from '../../studies/experiment/horizon-summary.ts';
import { flag, parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { readJsonConfig } from '../argv/config-file.ts';

export const command: Command = {
  name: 'experiment horizon',
  usage: 'esopt experiment horizon --config configs/experiment-horizon.json --out DIR [--store DIR] [--methods es,randomSearch,grpo] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, { config: { type: 'string' }, out: { type: 'string' }, store: { type: 'string', default: '.esopt/store' }, methods: { type: 'string', default: TRAINED.join(',') } });
    const path = flag(p.values, 'config', z.string().min(1));
    const config = readJsonConfig(path, HorizonExperimentConfig, 'horizon experiment config');
    const out = flag(p.values, 'out', z.string().min(1));
    // Methods to run; each is written into the cell files beside the methods an earlier run left there.
    const methods = flag(p.values, 'methods', z.string().transform((s) => s.split(',')).pipe(z.array(z.enum(TRAINED)).min(1)));
    const cells = await runHorizonExperiment(config, {
      out,
      storeRoot: flag(p.values, 'store', z.string().min(1)),
      methods,
      log: (s) => io.stderr(`${new Date().toISOString()} ${s}`),
      onCell: () => writeSummary(out, readCells(out)),
    });
    const summary = summarizeHorizon(cells);
    io.stdout(p.json ? JSON.stringify(summary) : summary.table);
    return 0;
  },
};
