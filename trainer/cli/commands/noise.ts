import { z } from 'zod';
import { noise } from '../../../shared/noise.ts';
import { flag, parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';

const uint = z.coerce.number().int().min(0).max(0xffffffff);

export const command: Command = {
  name: 'noise',
  usage: 'esopt noise --run-seed S --iteration K --member I --count N [--offset O] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, {
      'run-seed': { type: 'string' },
      iteration: { type: 'string' },
      member: { type: 'string' },
      count: { type: 'string' },
      offset: { type: 'string', default: '0' },
    });
    const key = {
      runSeed: flag(p.values, 'run-seed', uint),
      iteration: flag(p.values, 'iteration', uint),
      member: flag(p.values, 'member', uint),
    };
    const count = flag(p.values, 'count', z.coerce.number().int().min(0).max(10_000_000));
    const offset = flag(p.values, 'offset', z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER - 10_000_000));
    const values = Array.from(noise(key, count, offset));
    io.stdout(p.json ? JSON.stringify({ ...key, offset, count, values }) : values.map((v) => v.toPrecision(9)).join('\n'));
    return 0;
  },
};
