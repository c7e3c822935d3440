/**
 * The dashboard in real Chromium over a real store: a finished tiny run, a run trained while the page is
 * open (its rows arrive through the events stream), and an external evaluation with per-episode costs.
 * The curves' data and every table cell are compared with what the API serves; a screenshot is kept in
 * test-artifacts/.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EvaluationView, MetricsSeries } from '../../shared/schemas/index.ts';
import { sudoku } from '../../environments/sudoku/definition.ts';
import { startAgentServer, type AgentServer } from './agent-server.ts';
import { startTestApi, tinyRunConfig, TOKEN, waitFor, type TestApi } from './helpers.ts';

const OPTIONS = { size: 4, blanks: 2 } as const;
const TASKS = sudoku.sampleTasks('eval', 2, 5, sudoku.optionsSchema.parse(OPTIONS));
const LIVE_ITERATIONS = 5;

let api: TestApi;
let agent: AgentServer;
let browser: Browser;
let page: Page;
let finishedRun: string;
let evaluation: EvaluationView;
let refused: EvaluationView;
const pageErrors: string[] = [];

const fmt = (x: number | null, digits = 3) => (x === null ? '–' : x.toFixed(digits));
const pct = (x: number | null) => (x === null ? '–' : `${(x * 100).toFixed(1)}%`);
const usd = (x: number) => `$${x.toFixed(6)}`;

async function tableRows(selector: string): Promise<string[][]> {
  return page.$$eval(`${selector} tbody tr`, (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent ?? '')));
}

function expectedIterationRows(series: MetricsSeries): string[][] {
  return series.rows.map((r) => [
    String(r.iteration),
    `${r.counted} / ${r.expected}`,
    r.failed ? `${r.failed}${r.topError ? `: ${r.topError.message.slice(0, 60)}${r.topError.message.length > 60 ? '…' : ''} (×${r.topError.count})` : ''}` : '0',
    String(r.timedOut),
    fmt(r.meanReward),
    fmt(r.maxReward),
    pct(r.successRate),
    r.evaluation ? pct(r.evaluation.successRate) : '–',
    String(r.tokens.prompt + r.tokens.completion),
    usd(r.cost.usd),
    fmt(r.durations.total, 0),
  ]);
}

beforeAll(async () => {
  api = await startTestApi();
  agent = await startAgentServer('sk-dash', TASKS, (id) => id === TASKS[0].id);
  const run = await api.call('POST', '/runs', { body: tinyRunConfig({ name: 'finished' }) });
  finishedRun = run.body.id;
  const ev = await api.call('POST', '/evaluations', {
    body: {
      model: { kind: 'external', baseUrl: agent.baseUrl, model: 'their-agent', apiKey: 'sk-dash', pricing: { usdPerMillionPromptTokens: 2500, usdPerMillionCompletionTokens: 10000 } },
      environment: { name: 'sudoku', options: OPTIONS },
      tasks: { tasks: TASKS },
      episodes: 3,
      concurrency: 2,
    },
  });
  // An endpoint that refuses every call: every episode fails, which the views must say.
  const bad = await api.call('POST', '/evaluations', {
    body: {
      model: { kind: 'external', baseUrl: agent.baseUrl, model: 'their-agent', apiKey: 'sk-wrong-key', pricing: { usdPerMillionPromptTokens: 0, usdPerMillionCompletionTokens: 0 } },
      environment: { name: 'sudoku', options: OPTIONS },
      tasks: { tasks: TASKS },
      episodes: 2,
      concurrency: 2,
    },
  });
  await Promise.all([api.runs.settled(), api.evaluations.settled()]);
  evaluation = EvaluationView.parse((await api.call('GET', `/evaluations/${ev.body.id}`)).body);
  refused = EvaluationView.parse((await api.call('GET', `/evaluations/${bad.body.id}`)).body);
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'], timeout: 60_000 });
  page = await browser.newPage({ viewport: { width: 1280, height: 1400 } });
  page.on('pageerror', (err) => pageErrors.push(err.message));
}, 180_000);

afterAll(async () => {
  expect(pageErrors).toEqual([]);
  await browser?.close();
  await api?.dispose();
  await agent?.close();
});

describe('the dashboard at /', () => {
  it('asks for the token when it has none, and the API refuses the page\'s calls without one', async () => {
    await page.goto(`${api.url}/`);
    await page.waitForSelector('#token-form:not([hidden])');
    expect(await page.$$eval('#runs tbody tr', (trs) => trs.length)).toBe(0);
  });

  it('follows a run live: rows arrive through the events stream while it trains', async () => {
    const live = await api.call('POST', '/runs', { body: tinyRunConfig({ name: 'live', iterations: LIVE_ITERATIONS, evalInterval: 2, checkpointInterval: 5 }) });
    const id = live.body.id as string;
    await page.goto(`${api.url}/#token=${TOKEN}`);
    await page.waitForSelector('body[data-ready="true"]');
    expect(await page.textContent('#run-id')).toBe(id);
    const firstSeen = (await tableRows('#iterations')).length;
    await waitFor(async () => ((await page.textContent('#run-state')) === 'finished' ? true : undefined), 120_000, 'the live run to finish on the page');
    await waitFor(async () => ((await tableRows('#iterations')).length === LIVE_ITERATIONS ? true : undefined), 10_000, 'all rows');
    // The page was open before the run ended: the rest came from the stream, not from a reload.
    expect(firstSeen).toBeLessThan(LIVE_ITERATIONS);
    const series = MetricsSeries.parse((await api.call('GET', `/runs/${id}/metrics`)).body);
    expect(await tableRows('#iterations')).toEqual(expectedIterationRows(series));
    const reward = await page.evaluate(() => (globalThis as unknown as { esoptDashboard: { charts: { reward: { data: unknown } } } }).esoptDashboard.charts.reward.data);
    expect(reward).toEqual([series.rows.map((r) => r.iteration), series.rows.map((r) => r.meanReward), series.rows.map((r) => r.maxReward)]);
    await api.runs.settled();
  });

  it('shows a finished run\'s real numbers in its curves and iteration table', async () => {
    await page.click(`#runs tbody tr[data-id="${finishedRun}"]`);
    await waitFor(async () => ((await page.textContent('#run-id')) === finishedRun && (await tableRows('#iterations')).length === 3 ? true : undefined), 10_000, 'the finished run');
    // A run without pushed instructions says its episodes ran under the environments' own prompts.
    expect(await page.textContent('#run-instructions')).toBe("instructions: each environment's own prompt");
    const series = MetricsSeries.parse((await api.call('GET', `/runs/${finishedRun}/metrics`)).body);
    expect(await tableRows('#iterations')).toEqual(expectedIterationRows(series));

    const charts = await page.evaluate(() => {
      const d = (globalThis as unknown as { esoptDashboard: { charts: Record<string, { data: unknown }> } }).esoptDashboard;
      return { reward: d.charts.reward.data, success: d.charts.success.data };
    });
    expect(charts.reward).toEqual([[0, 1, 2], series.rows.map((r) => r.meanReward), series.rows.map((r) => r.maxReward)]);
    // Success: train rate per iteration, evaluations at θ_0, θ_2 and the final θ_3.
    const evalRate = new Map(series.evaluations.map((e) => [e.iteration, e.successRate]));
    expect(charts.success).toEqual([[0, 1, 2, 3], [...series.rows.map((r) => r.successRate), null], [0, 1, 2, 3].map((x) => evalRate.get(x) ?? null)]);
    // uPlot really drew them: a sized canvas in each chart.
    for (const sel of ['#reward-chart canvas', '#success-chart canvas']) {
      const box = await page.$eval(sel, (c) => ({ w: (c as unknown as { width: number; height: number }).width, h: (c as unknown as { width: number; height: number }).height }));
      expect(box.w).toBeGreaterThan(100);
      expect(box.h).toBeGreaterThan(50);
    }
    // The run table shows held-out success (the latest evaluation, θ_3) with its interval, not the members' training success.
    const runRow = (await tableRows('#runs')).find((r) => r[0] === finishedRun);
    const final = series.evaluations.find((e) => e.iteration === 3)!;
    expect(runRow).toEqual([finishedRun, 'finished', 'sudoku', '3 / 3', `${pct(final.successRate)} (${pct(final.interval.low)}–${pct(final.interval.high)}) @3`, final.failed ? expect.stringMatching(new RegExp(`^${final.failed} of ${final.tasks}`)) : 'none', usd(series.rows[2].spent!.usd)]);
    // spent so far: the rows' costs summed
    expect(series.rows[2].spent!.usd).toBeCloseTo(series.rows.reduce((a, r) => a + r.cost.usd, 0), 12);
    expect(await page.$eval('#runs thead', (t) => t.textContent)).toContain('held-out success (95% CI)');
    expect(await page.$eval('#iterations thead', (t) => t.textContent)).toContain('train success');
  });

  it('downloads the selected run\'s model after K updates as the tarball the route serves', async () => {
    await page.click(`#runs tbody tr[data-id="${finishedRun}"]`);
    await waitFor(async () => ((await page.textContent('#run-id')) === finishedRun ? true : undefined), 10_000, 'the run page');
    await page.fill('#model-iteration', '2');
    await page.selectOption('#model-format', 'safetensors');
    const download = page.waitForEvent('download');
    await page.click('#model-form button');
    const file = await download;
    expect(file.suggestedFilename()).toBe(`${finishedRun}-2-safetensors.tar`);
    const view = (await api.call('GET', `/runs/${finishedRun}/model?iteration=2&format=safetensors`, { headers: { accept: 'application/json' } })).body;
    expect(view).toMatchObject({ state: 'ready', iteration: 2, format: 'safetensors' });
    const bytes = readFileSync((await file.path())!);
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(view.sha256);
    expect(await page.textContent('#model-status')).toContain(`sha256 ${view.sha256.slice(0, 12)}`);
  });

  it('lists the evaluation with its costs, and every episode\'s cost on click', async () => {
    const s = evaluation.summary;
    const row = (await tableRows('#evaluations')).find((r) => r[0] === evaluation.id);
    expect(row).toEqual([
      evaluation.id,
      'finished',
      `their-agent @ ${new URL(agent.baseUrl).host}`,
      'sudoku',
      '3 / 3',
      `${pct(s.successRate)} (${pct(s.interval.low)}–${pct(s.interval.high)})`,
      'none',
      usd(s.totalCostUsd),
      usd(s.meanCostUsdPerEpisode as number),
      'completed',
    ]);
    expect(s.totalCostUsd).toBeGreaterThan(0);
    await page.click(`#evaluations tbody tr[data-id="${evaluation.id}"]`);
    await page.waitForSelector('#evaluation:not([hidden])');
    await waitFor(async () => ((await tableRows('#episodes')).length === 3 ? true : undefined), 10_000, 'episode rows');
    expect(await tableRows('#episodes')).toEqual(
      evaluation.episodes.map((e) => [String(e.index), e.task, fmt(e.reward), e.success ? 'yes' : 'no', String(e.steps), String(e.tokens.prompt + e.tokens.completion), fmt(e.durationMs, 0), usd(e.cost.usd), e.error ?? '']),
    );
    expect(await page.textContent('#evaluation-note')).toBe(s.note);
    expect(await page.textContent('#evaluation-instructions')).toBe("instructions: each environment's own prompt");
    // Every episode of the refused evaluation failed: the list says so beside its 0.0%, with the error.
    const r = refused.summary;
    expect(r).toMatchObject({ episodes: 2, failed: 2, successRate: 0, topError: { count: 2 } });
    const failedRow = (await tableRows('#evaluations')).find((x) => x[0] === refused.id)!;
    expect(failedRow[5]).toBe(`0.0% (${pct(r.interval.low)}–${pct(r.interval.high)})`);
    expect(failedRow[6]).toBe(`2 of 2: ${r.topError!.message.slice(0, 80)}${r.topError!.message.length > 80 ? '…' : ''} (×2)`);
    expect(r.note).toContain('2 failed (most often, 2×: ');
    mkdirSync('test-artifacts', { recursive: true });
    await page.screenshot({ path: 'test-artifacts/dashboard.png', fullPage: true });
  });
});
