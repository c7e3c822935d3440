import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { Id } from '../../../shared/schemas/index.ts';
import { demoSummary } from '../../studies/demo/demo-summary.ts';
import { readDemoConfig } from '../../studies/demo/demo-config.ts';
import { runDemo } from '../../studies/demo/demo.ts';
import { progressBar, silentProgress } from '../../training/loop/index.ts';
import { flag, parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { UsageError } from '../argv/usage-error.ts';

const DEMO = fileURLToPath(new URL('../../../configs/demo.json', import.meta.url));
const DEMO_GRPO = fileURLToPath(new URL('../../../configs/demo-grpo.json', import.meta.url));

export const command: Command = {
  name: 'start',
  usage: 'esopt start [--config RUN.json] [--grpo GRPO.json] [--run ID] [--store DIR] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, { config: { type: 'string', default: DEMO }, grpo: { type: 'string', default: DEMO_GRPO }, run: { type: 'string' }, store: { type: 'string', default: '.esopt/store' } });
    let demo;
    try {
      demo = readDemoConfig(flag(p.values, 'config', z.string().min(1)), flag(p.values, 'grpo', z.string().min(1)));
    } catch (err) {
      throw new UsageError(`--config: ${(err as Error).message}`);
    }
    const config = demo.run;
    const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*$/, '').replace('T', '-');
    const run = p.values.run === undefined ? `${config.name ?? config.environment.name}-${stamp}` : flag(p.values, 'run', Id);
    const report = await runDemo({
      demo,
      run,
      storeRoot: flag(p.values, 'store', z.string().min(1)),
      progress: p.json ? silentProgress : progressBar(config.iterations),
      showBaselineProgress: !p.json,
    });
    io.stdout(p.json ? JSON.stringify(report) : demoSummary(report));
    return 0;
  },
};
