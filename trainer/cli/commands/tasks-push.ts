import { readFileSync, statSync } from 'node:fs';
import { z } from 'zod';
import { pushSuite } from '../../../environments/task-suites/push-suite.ts';
import { TASK_SUITE_LIMITS, TaskSuiteName } from '../../../shared/schemas/index.ts';
import { flag, parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { storeFlags, storeFromFlags } from '../argv/store-flags.ts';
import { UsageError } from '../argv/usage-error.ts';

export const command: Command = {
  name: 'tasks push',
  usage:
    'esopt tasks push FILE.jsonl --name NAME --environment ENV [--store DIR | --cloud] [--json]\n' +
    `  FILE.jsonl: one task a line, each valid for ENV's task schema, each once (≤ ${TASK_SUITE_LIMITS.fileBytes} bytes, ≤ ${TASK_SUITE_LIMITS.lineBytes} a line)`,
  async run(argv, io) {
    const p = parseFlags(argv, { ...storeFlags, name: { type: 'string' }, environment: { type: 'string' } }, true);
    if (p.positionals.length !== 1) throw new UsageError('give exactly one JSONL file');
    const file = p.positionals[0];
    const name = flag(p.values, 'name', TaskSuiteName);
    const environment = flag(p.values, 'environment', z.string().min(1));
    let text: string;
    try {
      if (statSync(file).size > TASK_SUITE_LIMITS.fileBytes) throw new Error(`${file} is over ${TASK_SUITE_LIMITS.fileBytes} bytes, the most a task suite holds`);
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
    const chosen = storeFromFlags(p);
    try {
      let result;
      try {
        result = await pushSuite(chosen.store, { name, environment, text });
      } catch (err) {
        throw new UsageError(`${file}: ${(err as Error).message}`);
      }
      const r = result.record;
      if (p.json) io.stdout(JSON.stringify({ ...r, stored: result.stored, store: chosen.where }));
      else {
        io.stdout(
          [
            `pushed task suite ${r.name} (${r.environment}) to ${chosen.where}: ${r.tasks} tasks — train ${r.splits.train}, eval ${r.splits.eval}, validation ${r.splits.validation}${result.stored ? '' : ' (these exact tasks were stored already)'}`,
            `manifest ${r.manifestSha256}`,
          ].join('\n'),
        );
      }
      return 0;
    } finally {
      chosen.close();
    }
  },
};
