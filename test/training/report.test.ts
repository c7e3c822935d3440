/** The pure pieces of the loop's output: the Wilson interval, the curve's axes and the report's totals. */
import { Window } from 'happy-dom';
import { describe, expect, it } from 'vitest';
import type { EvaluationResult, MetricsRow, RunConfig } from '../../shared/schemas/index.ts';
import { RunConfig as RunConfigSchema } from '../../shared/schemas/index.ts';
import { niceTicks, renderCurveSvg } from '../../trainer/training/loop/curve-svg.ts';
import { stopAtFromEnv } from '../../trainer/training/loop/fault-points.ts';
import { buildReport } from '../../trainer/training/loop/report.ts';
import { wilsonInterval } from '../../shared/wilson.ts';
import { resolveModel } from '../../trainer/serving/model-name.ts';

describe('wilsonInterval', () => {
  it('matches published values and stays inside [0, 1]', () => {
    // Reference values (z = 1.96): 0/10 → [0, 0.2775], 5/10 → [0.2366, 0.7634], 10/10 → [0.7225, 1].
    const zero = wilsonInterval(0, 10);
    expect(zero.low).toBe(0);
    expect(zero.high).toBeCloseTo(0.2775, 4);
    const half = wilsonInterval(5, 10);
    expect(half.low).toBeCloseTo(0.2366, 4);
    expect(half.high).toBeCloseTo(0.7634, 4);
    const all = wilsonInterval(10, 10);
    expect(all.low).toBeCloseTo(0.7225, 4);
    expect(all.high).toBe(1);
    expect(wilsonInterval(0, 0)).toEqual({ low: 0, high: 1 });
  });
});

describe('niceTicks', () => {
  it('covers the range with 1/2/5 steps', () => {
    expect(niceTicks(0, 1)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    const t = niceTicks(0.13, 0.87);
    expect(t[0]).toBeLessThanOrEqual(0.13);
    expect(t.at(-1)).toBeGreaterThanOrEqual(0.87);
    expect(niceTicks(3, 3).length).toBeGreaterThan(1);
  });
});

const config: RunConfig = RunConfigSchema.parse({ environment: { name: 'sudoku' }, model: { preset: 'tiny' }, es: { population: 4, sigma: 0.1, alpha: 0.1 }, iterations: 3 });
const row = (k: number, mean: number, total: number, episodes: number): MetricsRow => ({
  run: 'r',
  iteration: k,
  expected: 4,
  counted: 4,
  failed: 0,
  invalid: 0,
  missing: 0,
  timedOut: 0,
  meanReward: mean,
  maxReward: mean + 0.25,
  successRate: 0,
  tokens: { prompt: 10, completion: 2 },
  cost: { usd: 0.5, lambdaGbSeconds: 0, gpuSeconds: 0 },
  durations: { manifest: 1, episodes, collect: 1, update: total - episodes - 2, checkpoint: 0, total },
  thetaHashAfter: 'x',
  evaluation: null,
  finishedAt: new Date().toISOString(),
});
const evaluation = (k: number, s: number): EvaluationResult => ({
  run: 'r',
  iteration: k,
  thetaHash: 'x',
  tasks: 10,
  successes: s,
  failed: 0,
  successRate: s / 10,
  interval: wilsonInterval(s, 10),
  meanReward: s / 10,
  perTask: [],
  durationMs: 1,
});

describe('report and curve', () => {
  const rows = [row(0, 0.1, 1000, 900), row(1, 0.3, 1000, 950), row(2, 0.5, 2000, 1950)];
  const evals = [evaluation(0, 1), evaluation(3, 6)];

  it('sums the run honestly', () => {
    const r = buildReport(config, { run: 'r', stoppedBy: null, rows, evaluations: evals, thetaHash: 'h', resumedAt: 0 }, { report: 'a', curve: 'b' });
    expect(r.totals.wallMs).toBe(4000);
    expect(r.totals.overheadRatio).toBeCloseTo(200 / 4000, 12);
    expect(r.totals.costUsd).toBeCloseTo(1.5, 12);
    expect(r.evaluationFirst).toMatchObject({ iteration: 0, successRate: 0.1 });
    expect(r.evaluationLast).toMatchObject({ iteration: 3, successRate: 0.6 });
    expect([r.rewardFirst, r.rewardLast]).toEqual([0.1, 0.5]);
    // and says what made it: this checkout's commit, the time, the load
    expect(r.made.commit).toMatch(/^[0-9a-f]{40}$/);
    expect(r.made.load).toHaveLength(3);
  });

  it('draws both panels as well-formed SVG with labelled axes and error bars', () => {
    const svg = renderCurveSvg('run r', rows, evals);
    const doc = new new Window().DOMParser().parseFromString(svg, 'image/svg+xml');
    const root = doc.documentElement;
    expect(root.tagName.toLowerCase()).toBe('svg');
    const texts = [...doc.querySelectorAll('text')].map((t) => t.textContent);
    expect(texts).toContain('iteration');
    expect(texts).toContain('reward');
    expect(texts).toContain('success rate');
    // Success axis is 0..1 whatever the data.
    expect(texts).toContain('0');
    expect(texts).toContain('1');
    expect(doc.querySelectorAll('path').length).toBe(3);
    // Two evaluations: a vertical bar and two caps each.
    expect(doc.querySelectorAll('line[stroke="#d62728"]').length).toBeGreaterThanOrEqual(6);
  });
});

describe('ESOPT_STOP_AT', () => {
  it('rejects an unknown point with the list of known ones', () => {
    expect(stopAtFromEnv(undefined)).toBeUndefined();
    expect(() => stopAtFromEnv('midway@1')).toThrow(/after-fanout/);
    expect(() => stopAtFromEnv('after-fanout')).toThrow(/<point>@<iteration>/);
    expect(typeof stopAtFromEnv('mid-checkpoint@3')).toBe('function');
  });
});

describe('resolveModel', () => {
  const live = { runSeed: 1, iteration: 5, sigma: 0.1, rank: 1, members: [0, 1].map((index) => ({ index, noiseIndex: 0, sign: (index ? -1 : 1) as 1 | -1 })) };
  it('maps names to selectors, 404 and 409', () => {
    expect(resolveModel('base', null)).toEqual({ ok: true, selector: { kind: 'base' } });
    expect(resolveModel('member-5-1', live)).toEqual({ ok: true, selector: { kind: 'member', iteration: 5, index: 1 } });
    expect(resolveModel('member-5-2', live)).toMatchObject({ ok: false, status: 404 });
    expect(resolveModel('member-4-0', live)).toMatchObject({ ok: false, status: 409 });
    expect(resolveModel('member-05-0', live)).toMatchObject({ ok: false, status: 404 });
    expect(resolveModel('member-5-0', null, 5)).toMatchObject({ ok: false, status: 409 });
    // An iteration after the newest this server has had live has not started here yet: retry, not drop.
    expect(resolveModel('member-5-0', null)).toMatchObject({ ok: false, status: 503 });
    expect(resolveModel('member-6-0', live)).toMatchObject({ ok: false, status: 503 });
    expect(resolveModel('member-6-0', null, 5)).toMatchObject({ ok: false, status: 503 });
  });
});
