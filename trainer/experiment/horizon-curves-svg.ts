/**
 * The horizon experiment's curves as a standalone SVG per horizon: each trained method's training success
 * against training episodes (mean over the seeds that reached that point: ES's perturbed members, GRPO's
 * sampled rollouts, random search's best candidate so far), and the held-out success of the base (at 0
 * episodes) and of each method's final θ (at its budget) with Wilson 95% bars. The y axis is always 0–1.
 */
import { niceTicks } from '../loop/curve-svg.ts';
import { TRAINED, type HorizonCell, type Method, type TrainedMethod } from './horizon-cell.ts';
import type { HorizonRow } from './horizon-summary.ts';

const W = 640;
const H = 380;
const M = { left: 60, right: 150, top: 40, bottom: 48 };
const COLOR: Record<Method, string> = { base: '#555555', es: '#d62728', grpo: '#1f77b4', randomSearch: '#2ca02c' };
const LABEL: Record<Method, string> = { base: 'base', es: 'ES', grpo: 'GRPO', randomSearch: 'random search' };

/** Mean over seeds of each method's training success at each episode count some seed reached. */
export function meanCurve(cells: readonly HorizonCell[], m: TrainedMethod): Array<[number, number]> {
  const at = new Map<number, number[]>();
  for (const c of cells) for (const p of c.curves[m] ?? []) at.set(p.episodes, [...(at.get(p.episodes) ?? []), p.successRate]);
  return [...at.entries()].sort((a, b) => a[0] - b[0]).map(([x, ys]) => [x, ys.reduce((s, y) => s + y, 0) / ys.length]);
}

export function renderHorizonCurves(row: HorizonRow, cells: readonly HorizonCell[]): string {
  const budget = Math.max(1, ...Object.values(row.episodes).flat(), ...TRAINED.flatMap((m) => meanCurve(cells, m).map(([x]) => x)));
  const xTicks = niceTicks(0, budget, 6);
  const x1 = xTicks[xTicks.length - 1];
  const plotW = W - M.left - M.right;
  const plotH = H - M.top - M.bottom;
  const sx = (x: number) => M.left + (x / x1) * plotW;
  const sy = (y: number) => M.top + plotH - y * plotH;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif">`,
    '<rect width="100%" height="100%" fill="white"/>',
    `<text x="${M.left}" y="24" font-size="15" font-weight="bold">H = ${row.horizon}: success against training episodes</text>`,
  ];
  for (const t of [0, 0.2, 0.4, 0.6, 0.8, 1]) {
    out.push(`<line x1="${M.left}" x2="${M.left + plotW}" y1="${sy(t)}" y2="${sy(t)}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${M.left - 6}" y="${sy(t) + 4}" font-size="11" text-anchor="end">${t}</text>`);
  }
  for (const t of xTicks) out.push(`<text x="${sx(t)}" y="${M.top + plotH + 16}" font-size="11" text-anchor="middle">${t}</text>`);
  out.push(`<rect x="${M.left}" y="${M.top}" width="${plotW}" height="${plotH}" fill="none" stroke="#333"/>`);
  out.push(`<text x="${M.left + plotW / 2}" y="${H - 10}" font-size="12" text-anchor="middle">training episodes (per seed)</text>`);
  out.push(`<text transform="translate(16 ${M.top + plotH / 2}) rotate(-90)" font-size="12" text-anchor="middle">success rate</text>`);
  for (const m of TRAINED) {
    const pts = meanCurve(cells, m);
    if (!pts.length) continue;
    out.push(`<path d="${pts.map(([x, y], j) => `${j ? 'L' : 'M'}${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join(' ')}" fill="none" stroke="${COLOR[m]}" stroke-width="1.5" stroke-dasharray="5 4"/>`);
  }
  // Held-out points: base at 0, each method at its budget, nudged apart so the bars do not overlap.
  const held: Array<[Method, number]> = [['base', 0], ['es', budget], ['grpo', budget], ['randomSearch', budget]];
  held.forEach(([m, x], i) => {
    const s = row.methods[m];
    if (!s) return;
    const cx = sx(x) + (m === 'base' ? 6 : (i - 2) * 7);
    out.push(`<line x1="${cx}" x2="${cx}" y1="${sy(s.low).toFixed(1)}" y2="${sy(s.high).toFixed(1)}" stroke="${COLOR[m]}" stroke-width="1.5"/>`);
    out.push(`<circle cx="${cx}" cy="${sy(s.successRate).toFixed(1)}" r="4" fill="${COLOR[m]}"/>`);
  });
  const legend: Array<[Method, string]> = [
    ['base', 'base, held-out'],
    ['es', 'ES'],
    ['grpo', 'GRPO'],
    ['randomSearch', 'random search'],
  ];
  legend.forEach(([m], i) => {
    const ly = M.top + 10 + i * 18;
    out.push(`<circle cx="${M.left + plotW + 16}" cy="${ly}" r="4" fill="${COLOR[m]}"/>`);
    out.push(`<text x="${M.left + plotW + 26}" y="${ly + 4}" font-size="11">${LABEL[m]}</text>`);
  });
  const note = M.top + 10 + legend.length * 18 + 8;
  out.push(`<line x1="${M.left + plotW + 8}" x2="${M.left + plotW + 24}" y1="${note}" y2="${note}" stroke="#333" stroke-dasharray="5 4"/>`);
  out.push(`<text x="${M.left + plotW + 28}" y="${note + 4}" font-size="10">training success</text>`);
  out.push(`<text x="${M.left + plotW + 8}" y="${note + 22}" font-size="10">dots: held-out,</text>`);
  out.push(`<text x="${M.left + plotW + 8}" y="${note + 36}" font-size="10">Wilson 95% bars</text>`);
  out.push('</svg>', '');
  return out.join('\n');
}
