import { z } from 'zod';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { mergeCell } from '../../experiment/horizon-cell.ts';
import { importCells } from '../../experiment/horizon-import.ts';
import { readCells, writeSummary } from '../../experiment/horizon-report.ts';
import { flag, parseFlags } from '../../argv/args.ts';
import type { Command } from '../../argv/command.ts';
import { UsageError } from '../../argv/usage-error.ts';

export const command: Command = {
  name: 'experiment horizon-summary',
  usage: 'esopt experiment horizon-summary --dir DIR [--stores DIR] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, { dir: { type: 'string' }, stores: { type: 'string' } });
    const dir = flag(p.values, 'dir', z.string().min(1));
    const stores = flag(p.values, 'stores', z.string().min(1).optional());
    let cells;
    try {
      // --stores: cells rebuilt from run stores are merged into the directory's cell files first.
      if (stores) {
        const existing = new Map(readCells(dir).map((c) => [`${c.horizon}/${c.seed}`, c]));
        for (const c of importCells(stores)) writeFileSync(join(dir, `h${c.horizon}-s${c.seed}.json`), JSON.stringify(mergeCell(existing.get(`${c.horizon}/${c.seed}`) ?? null, c), null, 1));
      }
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
