import { z } from 'zod';
import { readCells, writeSummary } from '../../experiment/horizon-report.ts';
import { flag, parseFlags } from '../../command/args.ts';
import type { Command } from '../../command/command.ts';
import { UsageError } from '../../command/usage-error.ts';

export const command: Command = {
  name: 'experiment horizon-summary',
  usage: 'esopt experiment horizon-summary --dir DIR [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, { dir: { type: 'string' } });
    const dir = flag(p.values, 'dir', z.string().min(1));
    let cells;
    try {
      cells = readCells(dir);
    } catch (err) {
      throw new UsageError(`--dir: ${(err as Error).message}`);
    }
    if (!cells.length) throw new UsageError(`--dir: ${dir} holds no cell files (h{H}-s{seed}.json)`);
    const summary = writeSummary(dir, cells);
    io.stdout(p.json ? JSON.stringify(summary) : summary.table);
    return 0;
  },
};
