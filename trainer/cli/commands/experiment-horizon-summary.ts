import { z } from 'zod';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { METHODS, mergeCell } from '../../studies/experiment/horizon-cell.ts';
import { versusRows, versusTable } from '../../studies/experiment/horizon-versus.ts';
import { importCells } from '../../studies/experiment/horizon-import.ts';
import { readCells, writeSummary } from '../../studies/experiment/horizon-report.ts';
import { flag, parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { UsageError } from '../argv/usage-error.ts';

export const command: Command = {
  name: 'experiment horizon-summary',
  usage: 'esopt experiment horizon-summary --dir DIR [--stores DIR] [--versus DIR [--method es]] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, { dir: { type: 'string' }, stores: { type: 'string' }, versus: { type: 'string' }, method: { type: 'string', default: 'es' } });
    const dir = flag(p.values, 'dir', z.string().min(1));
    const stores = flag(p.values, 'stores', z.string().min(1).optional());
    const versusDir = flag(p.values, 'versus', z.string().min(1).optional());
    const method = flag(p.values, 'method', z.enum(METHODS));
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
    if (!versusDir) {
      io.stdout(p.json ? JSON.stringify(summary) : summary.table);
      return 0;
    }
    // --versus: the same method in another run on the same held-out tasks (this run − that run).
    let versus;
    try {
      versus = versusRows(cells, readCells(versusDir), method);
    } catch (err) {
      throw new UsageError(`--versus: ${(err as Error).message}`);
    }
    if (!versus.length) throw new UsageError(`--versus: ${versusDir} has no ${method} cell at a horizon and seed of ${dir}`);
    const table = versusTable(versus, `${method} − ${method} of ${versusDir}`);
    io.stdout(p.json ? JSON.stringify({ ...summary, versus: { dir: versusDir, method, rows: versus } }) : `${summary.table}\n\n${table}`);
    return 0;
  },
};
