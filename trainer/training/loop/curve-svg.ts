/**
 * The training curve as a standalone SVG (no script, no fonts to fetch), in two panels sharing the
 * iteration axis: the mean (and max) episode reward of each iteration, and the evaluation success rate
 * of θ_k with its 95% interval as error bars. Axes are honest: the success axis is always 0–1, the reward
 * axis spans the data with "nice" ticks, and both start where the data starts.
 */
import type { EvaluationResult, MetricsRow } from '../../../shared/schemas/index.ts';

const W = 720;
const PANEL_H = 220;
const M = { left: 64, right: 24, top: 36, bottom: 40 };

/** Tick values at 1, 2 or 5 × 10^k covering [lo, hi]. */
export function niceTicks(lo: number, hi: number, target = 5): number[] {
  if (!(hi > lo)) {
    const pad = Math.abs(lo) > 0 ? Math.abs(lo) * 0.1 : 1;
    return niceTicks(lo - pad, hi + pad, target);
  }
  const raw = (hi - lo) / target;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((f) => f * mag).find((s) => s >= raw) ?? 10 * mag;
  const ticks: number[] = [];
  for (let v = Math.floor(lo / step) * step; v <= hi + step * 1e-9; v += step) ticks.push(Number(v.toPrecision(12)));
  if (ticks[ticks.length - 1] < hi) ticks.push(Number((ticks[ticks.length - 1] + step).toPrecision(12)));
  return ticks;
}

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function fmt(v: number): string {
  return Math.abs(v) >= 1000 || (Math.abs(v) < 0.01 && v !== 0) ? v.toExponential(1) : String(Number(v.toPrecision(3)));
}

interface Panel {
  title: string;
  yLabel: string;
  yTicks: number[];
  series: Array<{ label: string; color: string; points: Array<[number, number]>; dashed?: boolean }>;
  bars?: Array<{ x: number; lo: number; hi: number; color: string }>;
}

function panel(p: Panel, top: number, xTicks: number[]): string {
  const plotW = W - M.left - M.right;
  const plotH = PANEL_H - M.top - M.bottom;
  const [x0, x1] = [xTicks[0], xTicks[xTicks.length - 1]];
  const [y0, y1] = [p.yTicks[0], p.yTicks[p.yTicks.length - 1]];
  const sx = (x: number) => M.left + ((x - x0) / (x1 - x0 || 1)) * plotW;
  const sy = (y: number) => top + M.top + plotH - ((y - y0) / (y1 - y0 || 1)) * plotH;
  const out: string[] = [];
  out.push(`<text x="${M.left}" y="${top + 22}" font-size="14" font-weight="bold">${esc(p.title)}</text>`);
  for (const t of p.yTicks) {
    out.push(`<line x1="${M.left}" x2="${W - M.right}" y1="${sy(t)}" y2="${sy(t)}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${M.left - 6}" y="${sy(t) + 4}" font-size="11" text-anchor="end">${fmt(t)}</text>`);
  }
  for (const t of xTicks) out.push(`<text x="${sx(t)}" y="${top + PANEL_H - M.bottom + 16}" font-size="11" text-anchor="middle">${fmt(t)}</text>`);
  out.push(`<rect x="${M.left}" y="${top + M.top}" width="${plotW}" height="${plotH}" fill="none" stroke="#333"/>`);
  out.push(`<text x="${M.left + plotW / 2}" y="${top + PANEL_H - 6}" font-size="12" text-anchor="middle">iteration</text>`);
  out.push(`<text transform="translate(16 ${top + M.top + plotH / 2}) rotate(-90)" font-size="12" text-anchor="middle">${esc(p.yLabel)}</text>`);
  for (const b of p.bars ?? []) {
    out.push(`<line x1="${sx(b.x)}" x2="${sx(b.x)}" y1="${sy(b.lo)}" y2="${sy(b.hi)}" stroke="${b.color}" stroke-width="1.5"/>`);
    for (const y of [b.lo, b.hi]) out.push(`<line x1="${sx(b.x) - 4}" x2="${sx(b.x) + 4}" y1="${sy(y)}" y2="${sy(y)}" stroke="${b.color}" stroke-width="1.5"/>`);
  }
  p.series.forEach((s, i) => {
    if (s.points.length > 0) {
      const d = s.points.map(([x, y], j) => `${j === 0 ? 'M' : 'L'}${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join(' ');
      out.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="5 4"' : ''}/>`);
      for (const [x, y] of s.points) out.push(`<circle cx="${sx(x).toFixed(1)}" cy="${sy(y).toFixed(1)}" r="2.5" fill="${s.color}"/>`);
    }
    const lx = W - M.right - 120;
    const ly = top + 14 + i * 14;
    out.push(`<line x1="${lx}" x2="${lx + 18}" y1="${ly}" y2="${ly}" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="5 4"' : ''}/>`);
    out.push(`<text x="${lx + 24}" y="${ly + 4}" font-size="11">${esc(s.label)}</text>`);
  });
  return out.join('\n');
}

export function renderCurveSvg(title: string, rows: readonly MetricsRow[], evaluations: readonly EvaluationResult[]): string {
  const xs = [...rows.map((r) => r.iteration), ...evaluations.map((e) => e.iteration)];
  const xTicks = niceTicks(0, Math.max(1, ...xs), 8).filter((t) => Number.isInteger(t));
  const mean = rows.filter((r) => r.meanReward !== null).map((r) => [r.iteration, r.meanReward!] as [number, number]);
  const max = rows.filter((r) => r.maxReward !== null).map((r) => [r.iteration, r.maxReward!] as [number, number]);
  const ys = [...mean, ...max].map(([, y]) => y);
  const yTicks = ys.length ? niceTicks(Math.min(...ys), Math.max(...ys)) : [0, 1];
  const rewardPanel = panel(
    {
      title: 'Episode reward per iteration (members, training tasks)',
      yLabel: 'reward',
      yTicks,
      series: [
        { label: 'mean reward', color: '#1f77b4', points: mean },
        { label: 'max reward', color: '#9ecae1', points: max, dashed: true },
      ],
    },
    40,
    xTicks,
  );
  const successPanel = panel(
    {
      title: 'Evaluation success of θ_k (greedy, held-out, 95% Wilson)',
      yLabel: 'success rate',
      yTicks: [0, 0.2, 0.4, 0.6, 0.8, 1],
      series: [{ label: 'success rate', color: '#d62728', points: evaluations.map((e) => [e.iteration, e.successRate]) }],
      bars: evaluations.map((e) => ({ x: e.iteration, lo: e.interval.low, hi: e.interval.high, color: '#d62728' })),
    },
    40 + PANEL_H,
    xTicks,
  );
  const height = 40 + 2 * PANEL_H + 10;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${height}" viewBox="0 0 ${W} ${height}" font-family="sans-serif">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="${W / 2}" y="24" font-size="16" text-anchor="middle" font-weight="bold">${esc(title)}</text>`,
    rewardPanel,
    successPanel,
    '</svg>',
    '',
  ].join('\n');
}
