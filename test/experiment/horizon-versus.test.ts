import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { main } from '../../trainer/cli/main.ts';
import type { HorizonCell } from '../../trainer/studies/experiment/horizon-cell.ts';
import { versusRows } from '../../trainer/studies/experiment/horizon-versus.ts';

const T = true;
const F = false;
const tasks = ['a', 'b', 'c', 'd'];
const cell = (seed: number, es: boolean[], t = tasks): HorizonCell => ({ horizon: 15, seed, tasks: t, solved: { base: [F, F, F, F], es }, trainingEpisodes: { es: 8 }, curves: {}, wallMs: {} });

// Targeted ES (this run) at seeds 1, 2; ES on all weights (the other run) at seeds 1, 2, 3.
const targeted = [cell(1, [T, T, F, F]), cell(2, [T, F, F, T])];
const all = [cell(1, [T, F, F, F]), cell(2, [F, F, F, T]), cell(3, [T, T, T, T])];

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));
function dirOf(cells: HorizonCell[]): string {
  const d = mkdtempSync(join(tmpdir(), 'esopt-versus-'));
  dirs.push(d);
  for (const c of cells) writeFileSync(join(d, `h${c.horizon}-s${c.seed}.json`), JSON.stringify(c));
  return d;
}

describe('a method against itself in another run', () => {
  it('clusters the difference by task over the seeds both runs have', () => {
    const [row] = versusRows(targeted, all, 'es');
    // Per task, mean over seeds 1 and 2 of targeted − all: a (1−1 + 1−0)/2 = .5, b (1−0 + 0−0)/2 = .5, c 0, d 0.
    expect(row.seeds).toEqual([1, 2]);
    expect(row.improvement).toBeCloseTo(0.25, 12);
    expect(row.standardError).toBeCloseTo(Math.sqrt((3 * 0.25 ** 2 + 0.25 ** 2 * 1) / 3 / 4), 12);
  });

  it('refuses runs evaluated on different tasks, and a --versus with no shared cell', async () => {
    expect(() => versusRows(targeted, [cell(1, [T, T, T, T], ['a', 'b', 'c', 'e'])], 'es')).toThrow(/seed 1: the two runs were evaluated on different held-out tasks/);
    const err: string[] = [];
    const io = { stdout: () => {}, stderr: (s: string) => void err.push(s), readStdin: async () => '' };
    expect(await main(['experiment', 'horizon-summary', '--dir', dirOf(targeted), '--versus', dirOf([cell(7, [T, T, T, T])])], io)).toBe(2);
    expect(err.join('\n')).toMatch(/--versus: .* has no es cell at a horizon and seed of/);
  });

  it('esopt experiment horizon-summary --versus prints and returns the comparison', async () => {
    const out: string[] = [];
    const io = { stdout: (s: string) => void out.push(s), stderr: () => {}, readStdin: async () => '' };
    expect(await main(['experiment', 'horizon-summary', '--dir', dirOf(targeted), '--versus', dirOf(all), '--json'], io)).toBe(0);
    const json = JSON.parse(out[0]!);
    expect(json.versus.rows).toEqual(versusRows(targeted, all, 'es'));
    out.length = 0;
    await main(['experiment', 'horizon-summary', '--dir', dirOf(targeted), '--versus', dirOf(all)], io);
    expect(out[0]).toMatch(/\| 15 \| 2 × 4 \| \+25\.0 ± 14\.4 \(1\.73 SE\) \|/);
  });
});
