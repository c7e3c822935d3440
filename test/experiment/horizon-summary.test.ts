import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { main } from '../../trainer/cli/main.ts';
import type { HorizonCell } from '../../trainer/studies/experiment/horizon-cell.ts';
import { readCells, writeSummary } from '../../trainer/studies/experiment/horizon-report.ts';
import { summarizeHorizon } from '../../trainer/studies/experiment/horizon-summary.ts';

const T = true;
const F = false;
const tasks = ['a', 'b', 'c', 'd'];

// Seed 1 finished every method but random search; seed 2 was cut after ES.
const cells: HorizonCell[] = [
  {
    horizon: 8,
    seed: 1,
    tasks,
    solved: { base: [T, F, F, T], es: [T, T, F, T], grpo: [T, F, T, T] },
    trainingEpisodes: { es: 32, grpo: 32 },
    curves: { es: [{ episodes: 16, successRate: 0.5 }, { episodes: 32, successRate: 0.75 }], grpo: [{ episodes: 16, successRate: 0.25 }, { episodes: 32, successRate: 0.5 }] },
    wallMs: { es: 1, grpo: 1 },
  },
  {
    horizon: 8,
    seed: 2,
    tasks,
    solved: { base: [T, T, F, F], es: [T, T, T, F] },
    trainingEpisodes: { es: 32 },
    curves: { es: [{ episodes: 16, successRate: 0.25 }, { episodes: 32, successRate: 0.25 }] },
    wallMs: { es: 1 },
  },
];

describe('the horizon summary', () => {
  const [row] = summarizeHorizon(cells).rows;

  it('rates each method over the seeds that finished it, Wilson 95% over the distinct tasks, per-seed rates beside', () => {
    // base per task over the two seeds: 1, 0.5, 0, 0.5 → 0.5, the interval of 2 of 4 tasks (not 4 of 8)
    expect(row.methods.base).toMatchObject({ seeds: [1, 2], tasks: 4, successes: 4, successRate: 0.5, perSeed: [0.5, 0.5] });
    expect(row.methods.base!.low).toBeCloseTo(0.15, 3);
    expect(row.methods.base!.high).toBeCloseTo(0.85, 3);
    expect(row.methods.es).toMatchObject({ successes: 6, successRate: 0.75, perSeed: [0.75, 0.75] });
    expect(row.methods.grpo).toMatchObject({ seeds: [1], tasks: 4, successRate: 0.75 });
    expect(row.methods.randomSearch).toBeUndefined();
    expect(row.episodes).toEqual({ es: [32, 32], grpo: [32] });
  });

  it('clusters differences by task: averaged across seeds per task, the standard error over the tasks', () => {
    // ES − base: seed 1 d = [0,1,0,0], seed 2 d = [0,0,1,0] → per task [0, .5, .5, 0], mean .25, variance (4 × .0625)/3, SE √(1/12/4).
    expect(row.differences.esMinusBase).toMatchObject({ seeds: 2, tasks: 4 });
    expect(row.differences.esMinusBase!.improvement).toBeCloseTo(0.25, 12);
    expect(row.differences.esMinusBase!.standardError).toBeCloseTo(Math.sqrt(1 / 12 / 4), 12);
    // Pooling the 8 (seed, task) pairs as independent would claim SE √(1.5/7/8) ≈ 0.164 — and with more seeds ever smaller.
    // ES − GRPO on seed 1 only: d = [0, 1, −1, 0], mean 0, variance 2/3, SE √(2/3/4).
    expect(row.differences.esMinusGrpo).toMatchObject({ seeds: 1, tasks: 4, improvement: 0 });
    expect(row.differences.esMinusGrpo!.standardError).toBeCloseTo(Math.sqrt(2 / 3 / 4), 12);
    expect(row.differences.esMinusRandomSearch).toBeUndefined();
  });

  it('does not shrink the standard error by repeating the same tasks over more seeds', () => {
    const copies = [3, 4, 5].map((seed) => ({ ...cells[1]!, seed }));
    const [more] = summarizeHorizon([cells[1]!, ...copies]).rows;
    const [one] = summarizeHorizon([cells[1]!]).rows;
    expect(more!.differences.esMinusBase!.standardError).toBeCloseTo(one!.differences.esMinusBase!.standardError, 12);
    expect(more!.methods.base!.low).toBeCloseTo(one!.methods.base!.low, 12);
  });

  it('writes a table row per horizon, a dash where a method has no result', () => {
    const { table } = summarizeHorizon(cells);
    const line = table.split('\n')[2];
    expect(line).toMatch(/^\| 8 \| 2 × 4 \| 32 \| 50\.0 \[15\.0, 85\.0\] \(50\.0, 50\.0\) \| 75\.0 /);
    expect(line).toContain('+25.0 ± 14.4');
    expect(line.split('|').map((s) => s.trim())).toContain('—');
  });

  it('refuses cells of one horizon evaluated on different tasks', () => {
    expect(() => summarizeHorizon([cells[0], { ...cells[1], tasks: ['a', 'b', 'c', 'e'] }])).toThrow(/different held-out tasks/);
  });
});

describe('a results directory', () => {
  const dirs: string[] = [];
  afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));
  const dir = () => {
    const d = mkdtempSync(join(tmpdir(), 'horizon-'));
    dirs.push(d);
    return d;
  };

  it('is summarised from its cell files into summary.json, summary.md and one SVG per horizon', async () => {
    const d = dir();
    cells.forEach((c) => writeFileSync(join(d, `h${c.horizon}-s${c.seed}.json`), JSON.stringify(c)));
    writeFileSync(join(d, 'notes.json'), '{}');
    expect(readCells(d)).toEqual(cells);
    let out = '';
    const code = await main(['experiment', 'horizon-summary', '--dir', d, '--json'], { stdout: (t) => void (out += t), stderr: () => {}, readStdin: async () => '' });
    expect(code).toBe(0);
    expect(JSON.parse(out).rows[0].differences.esMinusBase).toMatchObject({ seeds: 2, tasks: 4 });
    expect(JSON.parse(readFileSync(join(d, 'summary.json'), 'utf8')).cells).toEqual([
      { horizon: 8, seed: 1, methods: ['base', 'es', 'grpo'] },
      { horizon: 8, seed: 2, methods: ['base', 'es'] },
    ]);
    expect(readFileSync(join(d, 'summary.md'), 'utf8')).toContain('![H = 8](curves-h8.svg)');
    const svg = readFileSync(join(d, 'curves-h8.svg'), 'utf8');
    expect(svg.startsWith('<svg')).toBe(true);
    // Held-out dots for base, ES and GRPO (no random search), and a training line for ES and GRPO.
    expect(svg.match(/<circle [^>]*r="4"/g)).toHaveLength(3 + 4);
    expect(svg.match(/<path /g)).toHaveLength(2);
  });

  it('names a malformed cell file and its field', () => {
    const d = dir();
    writeFileSync(join(d, 'h8-s1.json'), JSON.stringify({ ...cells[0], solved: { base: [T] } }));
    expect(() => readCells(d)).toThrow(/h8-s1\.json is not a horizon cell[\s\S]*solved\.base/);
    const e = dir();
    const err: string[] = [];
    return main(['experiment', 'horizon-summary', '--dir', e], { stdout: () => {}, stderr: (t) => void err.push(t), readStdin: async () => '' }).then((code) => {
      expect(code).toBe(2);
      expect(err.join('\n')).toContain('holds no cell files');
    });
  });
});
