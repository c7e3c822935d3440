/**
 * One chart comparing ES with its baselines on a setting, as a standalone SVG: each trained method's training
 * success against training episodes (dashed) and the held-out success of the base (at 0 episodes) and of each
 * method's final θ (at its budget) with Wilson 95% bars. The y axis is always 0–1. The demo (`npm start`) and
 * the horizon experiment draw theirs with it.
 */
import { niceTicks } from '../../training/loop/index.ts';

export type ComparedMethod = 'base' | 'es' | 'grpo' | 'randomSearch';
export type TrainedMethod = Exclude<ComparedMethod, 'base'>;
export const TRAINED_METHODS: readonly TrainedMethod[] = ['es', 'grpo', 'randomSearch'];

export interface HeldOutRate {
  successRate: number;
  low: number;
  high: number;
}

export interface Comparison {
  title: string;
  xLabel: string;
  /** Training success against training episodes, per trained method. */
  curves: Partial<Record<TrainedMethod, Array<[number, number]>>>;
  heldOut: Partial<Record<ComparedMethod, HeldOutRate>>;
  /** The training episodes each method spent (where its held-out point sits). */
  budget: number;
  /** A line under the title (what was found), if any. */
  subtitle?: string;
}

const W = 640;
const H = 420;
const COLOR: Record<ComparedMethod, string> = { base: '#555555', es: '#d62728', grpo: '#1f77b4', randomSearch: '#2ca02c' };
const LABEL: Record<ComparedMethod, string> = { base: 'base', es: 'ES', grpo: 'GRPO', randomSearch: 'random search' };

const escape = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** Words into lines of at most `width` characters. */
function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  for (const word of text.split(/\s+/)) {
    const last = lines.at(-1);
    if (last !== undefined && last.length + 1 + word.length <= width) lines[lines.length - 1] = `${last} ${word}`;
    else lines.push(word);
  }
  return lines;
}

export function renderComparison(c: Comparison): string {
  const sub = c.subtitle ? wrap(c.subtitle, 100) : [];
  const M = { left: 60, right: 150, top: 40 + sub.length * 14, bottom: 48 };
  const budget = Math.max(1, c.budget, ...TRAINED_METHODS.flatMap((m) => (c.curves[m] ?? []).map(([x]) => x)));
  const xTicks = niceTicks(0, budget, 6);
  const x1 = xTicks[xTicks.length - 1]!;
  const plotW = W - M.left - M.right;
  const plotH = H - M.top - M.bottom;
  const sx = (x: number) => M.left + (x / x1) * plotW;
  const sy = (y: number) => M.top + plotH - y * plotH;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif">`,
    '<rect width="100%" height="100%" fill="white"/>',
    `<text x="${M.left}" y="24" font-size="15" font-weight="bold">${escape(c.title)}</text>`,
    ...sub.map((line, i) => `<text x="${M.left}" y="${42 + i * 14}" font-size="11">${escape(line)}</text>`),
  ];
  for (const t of [0, 0.2, 0.4, 0.6, 0.8, 1]) {
    out.push(`<line x1="${M.left}" x2="${M.left + plotW}" y1="${sy(t)}" y2="${sy(t)}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${M.left - 6}" y="${sy(t) + 4}" font-size="11" text-anchor="end">${t}</text>`);
  }
  for (const t of xTicks) out.push(`<text x="${sx(t)}" y="${M.top + plotH + 16}" font-size="11" text-anchor="middle">${t}</text>`);
  out.push(`<rect x="${M.left}" y="${M.top}" width="${plotW}" height="${plotH}" fill="none" stroke="#333"/>`);
  out.push(`<text x="${M.left + plotW / 2}" y="${H - 10}" font-size="12" text-anchor="middle">${escape(c.xLabel)}</text>`);
  out.push(`<text transform="translate(16 ${M.top + plotH / 2}) rotate(-90)" font-size="12" text-anchor="middle">success rate</text>`);
  for (const m of TRAINED_METHODS) {
    const pts = c.curves[m] ?? [];
    if (!pts.length) continue;
    out.push(`<path data-method="${m}" d="${pts.map(([x, y], j) => `${j ? 'L' : 'M'}${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join(' ')}" fill="none" stroke="${COLOR[m]}" stroke-width="1.5" stroke-dasharray="5 4"/>`);
  }
  // Held-out points: base at 0, each method at its budget, nudged apart so the bars do not overlap.
  const held: Array<[ComparedMethod, number]> = [['base', 0], ['es', c.budget], ['grpo', c.budget], ['randomSearch', c.budget]];
  held.forEach(([m, x], i) => {
    const s = c.heldOut[m];
    if (!s) return;
    const cx = sx(x) + (m === 'base' ? 6 : (i - 2) * 7);
    out.push(`<line data-method="${m}" x1="${cx}" x2="${cx}" y1="${sy(s.low).toFixed(1)}" y2="${sy(s.high).toFixed(1)}" stroke="${COLOR[m]}" stroke-width="1.5"/>`);
    out.push(`<circle data-method="${m}" cx="${cx}" cy="${sy(s.successRate).toFixed(1)}" r="4" fill="${COLOR[m]}"/>`);
  });
  const legend: ComparedMethod[] = ['base', 'es', 'grpo', 'randomSearch'];
  legend.forEach((m, i) => {
    const ly = M.top + 10 + i * 18;
    out.push(`<circle cx="${M.left + plotW + 16}" cy="${ly}" r="4" fill="${COLOR[m]}"/>`);
    out.push(`<text x="${M.left + plotW + 26}" y="${ly + 4}" font-size="11">${m === 'base' ? 'base, held-out' : LABEL[m]}</text>`);
  });
  const note = M.top + 10 + legend.length * 18 + 8;
  out.push(`<line x1="${M.left + plotW + 8}" x2="${M.left + plotW + 24}" y1="${note}" y2="${note}" stroke="#333" stroke-dasharray="5 4"/>`);
  out.push(`<text x="${M.left + plotW + 28}" y="${note + 4}" font-size="10">training success</text>`);
  out.push(`<text x="${M.left + plotW + 8}" y="${note + 22}" font-size="10">dots: held-out,</text>`);
  out.push(`<text x="${M.left + plotW + 8}" y="${note + 36}" font-size="10">Wilson 95% bars</text>`);
  out.push('</svg>', '');
  return out.join('\n');
}
