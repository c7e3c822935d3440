/**
 * The dashboard's episode replay and agent comparison, looked at in real Chromium over evaluations the
 * Episode handler played on a page that draws a PNG each step (replay-fixture.ts): every step's screenshot
 * is the very picture of that state (its pixels are checked), beside the observation, the error and the
 * action the API reports; the comparison shows the API's frontier and refuses other tasks on the page. A
 * screenshot is kept in test-artifacts/.
 */
import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { EpisodeReplay, EvaluationComparison } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { colourAt, FRAME_SIZE, seedEvaluation } from './replay-fixture.ts';
import { startTestApi, TOKEN, waitFor, type TestApi } from './helpers.ts';

vi.mock(import('../../environments/index.ts'), async (original) => {
  const real = await original();
  const { counterDefinition } = await import('./counter-page.ts');
  return { ...real, loadEnvironment: async (name: string) => (name === 'web' ? counterDefinition : real.loadEnvironment(name)) } as typeof real;
});

const TASKS = [
  { id: 'count-to-2', task: { target: 2 } },
  { id: 'count-to-1', task: { target: 1 } },
];
const root = mkdtempSync(join(tmpdir(), 'esopt-dash-replay-'));
let api: TestApi;
let browser: Browser;
let page: Page;
const pageErrors: string[] = [];

interface ShownStep {
  step: string;
  heading: string;
  observation: string;
  error: string | null;
  action: string;
  image: { width: number; height: number; pixel: number[] } | null;
}

/** What the page's script sees, typed by hand: the tests compile without the DOM library. */
interface Img {
  naturalWidth: number;
  naturalHeight: number;
  src: string;
}
interface Canvas {
  width: number;
  height: number;
  getContext(kind: '2d'): { drawImage(img: Img, x: number, y: number): void; getImageData(x: number, y: number, w: number, h: number): { data: ArrayLike<number> } };
}
type Card = { dataset: Record<string, string | undefined>; querySelector(sel: string): ({ textContent: string | null } & Partial<Img>) | null };

/** Each step card as the page shows it, with its picture's size and the colour of its centre pixel. */
async function shownSteps(): Promise<ShownStep[]> {
  return page.$$eval('#replay-steps li.step', (elements) =>
    (elements as unknown as Card[]).map((li) => {
      const img = li.querySelector('img') as Img | null;
      let image: { width: number; height: number; pixel: number[] } | null = null;
      if (img) {
        const canvas = (globalThis as unknown as { document: { createElement(tag: 'canvas'): Canvas } }).document.createElement('canvas');
        canvas.width = img.naturalWidth;
        canvas.height = img.naturalHeight;
        const ctx = canvas.getContext('2d');
        ctx.drawImage(img, 0, 0);
        image = { width: img.naturalWidth, height: img.naturalHeight, pixel: [...Array.from(ctx.getImageData(img.naturalWidth >> 1, img.naturalHeight >> 1, 1, 1).data)].slice(0, 3) };
      }
      return {
        step: li.dataset.step ?? '',
        heading: li.querySelector('h4')?.textContent ?? '',
        observation: li.querySelector('pre.observation')?.textContent ?? '',
        error: li.querySelector('pre.step-error')?.textContent ?? null,
        action: li.querySelector('pre.action')?.textContent ?? '',
        image,
      };
    }),
  );
}

async function openEpisode(evaluation: string, index: number): Promise<void> {
  await page.click(`#evaluations tbody tr[data-id="${evaluation}"]`);
  await waitFor(async () => ((await page.textContent('#evaluation-id')) === evaluation && (await page.$$('#episodes tbody tr')).length === 2 ? true : undefined), 10_000, `${evaluation}'s episodes`);
  await page.click(`#episodes tbody tr[data-index="${index}"]`);
  await page.waitForSelector('#replay[data-ready="true"]:not([hidden])', { timeout: 10_000 });
}

beforeAll(async () => {
  const store = new FsObjectStore(root);
  await seedEvaluation(store, { id: 'eval-good', agent: 'good', tasks: TASKS, episodes: 2, usdPerMillionPromptTokens: 1000, createdAt: '2026-12-06T10:00:00.000Z' });
  await seedEvaluation(store, { id: 'eval-bad', agent: 'bad', tasks: TASKS, episodes: 2, usdPerMillionPromptTokens: 1000, createdAt: '2026-12-06T10:01:00.000Z' });
  await seedEvaluation(store, { id: 'eval-pricey', agent: 'bad', tasks: TASKS, episodes: 2, usdPerMillionPromptTokens: 3000, createdAt: '2026-12-06T10:02:00.000Z' });
  await seedEvaluation(store, { id: 'eval-other', agent: 'good', tasks: [TASKS[0]!], episodes: 2, usdPerMillionPromptTokens: 1000, createdAt: '2026-12-06T10:03:00.000Z' });
  api = await startTestApi(root, { gpuSecondsPerToken: 0 });
  browser = await chromium.launch({ executablePath: process.env.ESOPT_CHROMIUM ?? '/usr/bin/chromium', args: ['--no-sandbox'], timeout: 60_000 });
  page = await browser.newPage({ viewport: { width: 1280, height: 1400 } });
  page.on('pageerror', (err) => pageErrors.push(err.message));
  await page.goto(`${api.url}/#token=${TOKEN}`);
  await page.waitForSelector('body[data-ready="true"]');
}, 120_000);

afterAll(async () => {
  expect(pageErrors).toEqual([]);
  await browser?.close();
  await api?.dispose();
});

describe('the dashboard replays an evaluation episode', () => {
  it("shows each step's own screenshot beside its observation and the action taken on it", async () => {
    await openEpisode('eval-good', 0);
    const replay = EpisodeReplay.parse((await api.call('GET', '/evaluations/eval-good/episodes/0')).body);
    expect(await page.textContent('#replay-title')).toBe('0 · task count-to-2 · reward 1.000 · succeeded');
    expect(await page.textContent('#replay-notes')).toBe('4 screenshot(s) kept');
    const steps = await shownSteps();
    expect(steps.map((s) => [s.step, s.observation, s.action, s.error])).toEqual(replay.steps.map((s) => [String(s.step), s.observation, s.action ? s.action.text : '— (none after this state)', s.error]));
    expect(steps.map((s) => s.heading)).toEqual(['Step 0 (after reset)', 'Step 1', 'Step 2', 'Step 3 · done · reward 1.000']);
    // The pictures are the frames of these very states: the counter's value is the colour.
    expect(steps.map((s) => s.image)).toEqual([0, 1, 2, 2].map((count) => ({ ...FRAME_SIZE, pixel: colourAt(count) })));
    // No token in any URL the page made for them.
    expect(await page.$$eval('#replay-steps img', (imgs) => (imgs as unknown as Img[]).map((i) => i.src.startsWith('blob:')))).toEqual([true, true, true, true]);
  });

  it('shows the error an action met, and that the episode failed', async () => {
    await openEpisode('eval-bad', 1);
    expect(await page.textContent('#replay-title')).toBe('1 · task count-to-1 · reward 0.000 · failed');
    const steps = await shownSteps();
    expect(steps.map((s) => [s.step, s.action, s.error])).toEqual([
      ['0', 'jump', null],
      ['1', 'submit', 'no action "jump"'],
      ['2', '— (none after this state)', null],
    ]);
    expect(steps[1]!.observation).toBe('Error: no action "jump". Counter: 0.');
    expect(steps.every((s) => s.image !== null && s.image.pixel.join() === colourAt(0).join())).toBe(true);
  });
});

describe('the dashboard compares agents', () => {
  it('ticks the evaluations of the same tasks, and draws the API\'s frontier with intervals', async () => {
    await openEpisode('eval-good', 1);
    const ticked = await page.$$eval('#compare-choices input', (boxes) => (boxes as unknown as Array<{ value: string; checked: boolean }>).map((b) => [b.value, b.checked]));
    expect(Object.fromEntries(ticked)).toEqual({ 'eval-good': true, 'eval-bad': true, 'eval-pricey': true, 'eval-other': false });
    await page.click('#compare-form button');
    await page.waitForSelector('#compare-result:not([hidden])');
    // The selected evaluation is the reference, the others in the list's order (newest first).
    const ids = ['eval-good', 'eval-pricey', 'eval-bad'].join(',');
    const comparison = EvaluationComparison.parse((await api.call('GET', `/evaluations/compare?ids=${ids}`)).body);
    const rows = await page.$$eval('#comparison tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent ?? '')));
    const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
    expect(rows).toEqual(
      comparison.evaluations.map((e) => [
        e.id,
        `${(e.model as { model: string }).model} @ agents.example.com`,
        `${pct(e.successRate)} (${pct(e.interval.low)}–${pct(e.interval.high)})`,
        `${e.successes} / ${e.episodes}`,
        `$${e.meanCostUsdPerEpisode.toFixed(6)}`,
        e.frontier ? 'frontier' : `dominated by ${e.dominatedBy.join(', ')}`,
      ]),
    );
    expect(rows.find((r) => r[0] === 'eval-pricey')![5]).toBe('dominated by eval-good, eval-bad');
    const points = await page.$$eval('#compare-chart circle', (cs) => cs.map((c) => [c.getAttribute('data-id'), c.getAttribute('data-frontier'), c.getAttribute('fill')]));
    expect(points.sort()).toEqual([
      ['eval-bad', 'true', '#2563eb'],
      ['eval-good', 'true', '#2563eb'],
      ['eval-pricey', 'false', 'white'],
    ]);
    // The cheaper point sits to the left, the more successful one higher.
    const at = async (id: string) => page.$eval(`#compare-chart circle[data-id="${id}"]`, (c) => [Number(c.getAttribute('cx')), Number(c.getAttribute('cy'))]);
    const [good, bad, pricey] = [await at('eval-good'), await at('eval-bad'), await at('eval-pricey')];
    expect(bad[0]).toBeLessThan(good[0]!);
    expect(good[0]).toBeLessThan(pricey[0]!);
    expect(good[1]).toBeLessThan(bad[1]!);
    expect(await page.textContent('#compare-suite')).toMatch(/^suite explicit tasks · 2 web task\(s\), tasks sha256 [0-9a-f]{12} · judge web v1, success at reward ≥ 1$/);
    mkdirSync('test-artifacts', { recursive: true });
    await page.screenshot({ path: 'test-artifacts/dashboard-replay.png', fullPage: true });
  });

  it('refuses evaluations of other tasks, saying which', async () => {
    await page.check('#compare-choices input[value="eval-other"]');
    await page.click('#compare-form button');
    await page.waitForSelector('#compare-error:not([hidden])');
    expect(await page.textContent('#compare-error')).toMatch(/^cannot compare: eval-other played other tasks than eval-good: web tasks "explicit tasks", 1 task\(s\)/);
    expect(await page.isHidden('#compare-result')).toBe(true);
  });
});
