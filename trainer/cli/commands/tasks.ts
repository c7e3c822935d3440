import { z } from 'zod';
import { loadEnvironment, parseWith } from '../../../environments/index.ts';
import { Seed } from '../../../shared/schemas/index.ts';
import { flag, parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { jsonFlag } from '../argv/json-flag.ts';
import { UsageError } from '../argv/usage-error.ts';

export const command: Command = {
  name: 'tasks',
  usage: 'esopt tasks --env <name> --split <train|eval|validation> --n N [--seed S] [--options <json|@file>] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, {
      env: { type: 'string' },
      split: { type: 'string' },
      n: { type: 'string' },
      seed: { type: 'string', default: '0' },
      options: { type: 'string' },
    });
    const name = flag(p.values, 'env', z.string().min(1));
    const split = flag(p.values, 'split', z.enum(['train', 'eval', 'validation']));
    const n = flag(p.values, 'n', z.coerce.number().int().min(0).max(100_000));
    const seed = flag(p.values, 'seed', z.coerce.number().pipe(Seed));
    let definition;
    try {
      definition = await loadEnvironment(name);
    } catch (err) {
      throw new UsageError(`--env: ${(err as Error).message}`);
    }
    let options: unknown;
    try {
      options = parseWith(definition.optionsSchema, jsonFlag(p.values, 'options', {}), `--options for ${name}`);
    } catch (err) {
      if (err instanceof UsageError) throw err;
      throw new UsageError((err as Error).message);
    }
    const tasks = definition.sampleTasks(split, n, seed, options);
    io.stdout(p.json ? JSON.stringify(tasks) : tasks.map((t) => `${t.id}\t${JSON.stringify(t.task)}`).join('\n'));
    return 0;
  },
};
