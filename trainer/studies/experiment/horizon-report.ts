/**
 * The horizon experiment's results directory: the per-cell JSON files (`h{H}-s{seed}.json`) read back and
 * validated, and the summary written beside them (summary.json, summary.md, curves-h{H}.svg) from whichever
 * cells exist.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { HorizonCell } from './horizon-cell.ts';
import { renderHorizonCurves } from './horizon-curves-svg.ts';
import { summarizeHorizon, type HorizonSummary } from './horizon-summary.ts';
import { provenance } from '../../training/provenance.ts';

const CELL_FILE = /^h(\d+)-s(\d+)\.json$/;

export function readCells(dir: string): HorizonCell[] {
  const files = readdirSync(dir).filter((f) => CELL_FILE.test(f)).sort();
  return files.map((f) => {
    const parsed = HorizonCell.safeParse(JSON.parse(readFileSync(join(dir, f), 'utf8')));
    if (!parsed.success) throw new Error(`${join(dir, f)} is not a horizon cell:\n${z.prettifyError(parsed.error)}`);
    return parsed.data;
  });
}

export function writeSummary(dir: string, cells: readonly HorizonCell[]): HorizonSummary {
  const summary = summarizeHorizon(cells);
  // The summary is derived from the cells; `made` says when, at which commit and load, it was derived.
  writeFileSync(join(dir, 'summary.json'), JSON.stringify({ ...summary, made: provenance() }, null, 1));
  const md = [
    '# Horizon experiment summary',
    '',
    'Held-out success in % over the seeds that finished each method: rate [Wilson 95% over the distinct tasks] (per seed).',
    'Differences clustered by task: per task the mean over seeds of the paired difference, then their mean ± the standard error over the tasks, in points.',
    'The seeds share their held-out tasks, so the task, not the (seed, task) pair, is the unit of replication.',
    '',
    summary.table,
    '',
    ...summary.rows.map((r) => `![H = ${r.horizon}](curves-h${r.horizon}.svg)`),
    '',
    `Cells: ${summary.cells.map((c) => `H${c.horizon}/s${c.seed} (${c.methods.join(', ')})`).join('; ')}`,
    '',
  ].join('\n');
  writeFileSync(join(dir, 'summary.md'), md);
  for (const r of summary.rows) writeFileSync(join(dir, `curves-h${r.horizon}.svg`), renderHorizonCurves(r, cells.filter((c) => c.horizon === r.horizon)));
  return summary;
}
