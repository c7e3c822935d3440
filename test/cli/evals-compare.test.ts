/**
 * `esopt evals compare` against a real local API over evaluations the Episode handler played
 * (test/api/replay-fixture.ts): the table, --json as the API's comparison, --results files that compare
 * again from disk, and the refusals.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { EvaluationComparison, EvaluationResultFile } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { main } from '../../trainer/cli/main.ts';
import { seedEvaluation } from '../api/replay-fixture.ts';
import { startTestApi, TOKEN, type TestApi } from '../api/helpers.ts';

vi.mock(import('../../environments/index.ts'), async (original) => {
  const real = await original();
  const { counterDefinition } = await import('../api/counter-page.ts');
  return { ...real, loadEnvironment: async (name: string) => (name === 'web' ? counterDefinition : real.loadEnvironment(name)) } as typeof real;
});

const TASKS = [
  { id: 'count-to-3', task: { target: 3 } },
  { id: 'count-to-1', task: { target: 1 } },
];
const root = mkdtempSync(join(tmpdir(), 'esopt-cli-compare-'));
const dir = mkdtempSync(join(tmpdir(), 'esopt-cli-compare-out-'));
let api: TestApi;
const savedToken = process.env.ESOPT_TOKEN;

async function esopt(...argv: string[]) {
  let out = '';
  let err = '';
  const io = { stdout: (t: string) => void (out += `${t}\n`), stderr: (t: string) => void (err += `${t}\n`), readStdin: async () => '' };
  const code = await main([...argv, '--api', api.url], io);
  return { code, out, err };
}

beforeAll(async () => {
  const store = new FsObjectStore(root);
  await seedEvaluation(store, { id: 'eval-solver', agent: 'good', tasks: TASKS, episodes: 4, usdPerMillionPromptTokens: 500 });
  await seedEvaluation(store, { id: 'eval-guesser', agent: 'bad', tasks: TASKS, episodes: 4, usdPerMillionPromptTokens: 500 });
  await seedEvaluation(store, { id: 'eval-dear', agent: 'bad', tasks: TASKS, episodes: 2, usdPerMillionPromptTokens: 5000 });
  await seedEvaluation(store, { id: 'eval-elsewhere', agent: 'good', tasks: [TASKS[1]!], episodes: 1, usdPerMillionPromptTokens: 500 });
  api = await startTestApi(root, { gpuSecondsPerToken: 0 });
  process.env.ESOPT_TOKEN = TOKEN;
}, 60_000);

afterAll(async () => {
  if (savedToken === undefined) delete process.env.ESOPT_TOKEN;
  else process.env.ESOPT_TOKEN = savedToken;
  await api?.dispose();
});

describe('esopt evals compare', () => {
  it('prints success with its interval against cost per episode, and which evaluations are dominated', async () => {
    const r = await esopt('evals', 'compare', 'eval-solver', 'eval-guesser', 'eval-dear');
    expect([r.code, r.err]).toEqual([0, '']);
    const lines = r.out.trim().split('\n');
    expect(lines[0]).toMatch(/^suite explicit tasks: 2 web task\(s\), tasks sha256 [0-9a-f]{64}$/);
    expect(lines[1]).toBe('judge web v1: success at reward ≥ 1');
    const row = (id: string) => lines.find((l) => l.startsWith(id))!.split(/\s{2,}/);
    // Solver: 4 and 2 replies of 100 prompt tokens at $500/M → $0.15 per episode; guesser always 2 → $0.10.
    expect(row('eval-solver')).toEqual(['eval-solver', 'good-agent @ agents.example.com', '100.0% [51.0%–100.0%]', '4/4', '$0.150000', '* frontier']);
    expect(row('eval-guesser')).toEqual(['eval-guesser', 'bad-agent @ agents.example.com', '0.0% [0.0%–49.0%]', '0/4', '$0.100000', '* frontier']);
    expect(row('eval-dear')).toEqual(['eval-dear', 'bad-agent @ agents.example.com', '0.0% [0.0%–65.8%]', '0/2', '$1.000000', 'dominated by eval-solver, eval-guesser']);
    expect(lines.at(-1)).toBe('frontier (cheapest first): eval-guesser, eval-solver');
  });

  it('--json is the API\'s comparison; --results writes result files that compare again from disk, with ids mixed in', async () => {
    const r = await esopt('evals', 'compare', 'eval-solver', 'eval-guesser', 'eval-dear', '--json', '--results', dir);
    expect(r.code).toBe(0);
    const fromCli = EvaluationComparison.parse(JSON.parse(r.out));
    const fromApi = EvaluationComparison.parse((await api.call('GET', '/evaluations/compare?ids=eval-solver,eval-guesser,eval-dear')).body);
    expect(fromCli).toEqual(fromApi);
    const saved = EvaluationResultFile.parse(JSON.parse(readFileSync(join(dir, 'eval-solver.json'), 'utf8')));
    expect(saved).toEqual((await api.call('GET', '/evaluations/eval-solver/result')).body);
    expect(saved.tasks.map((t) => [t.id, t.episodes.map((e) => e.success)])).toEqual([
      ['count-to-3', [true, true]],
      ['count-to-1', [true, true]],
    ]);
    const again = await esopt('evals', 'compare', join(dir, 'eval-solver.json'), join(dir, 'eval-dear.json'), 'eval-guesser', '--json');
    expect(again.code).toBe(0);
    expect(EvaluationComparison.parse(JSON.parse(again.out)).frontier).toEqual(['eval-guesser', 'eval-solver']);
  });

  it('refuses evaluations of other tasks (exit 1, naming the argument), and bad usage (exit 2)', async () => {
    const other = await esopt('evals', 'compare', 'eval-solver', 'eval-elsewhere');
    expect(other.code).toBe(1);
    expect(other.err).toContain('argument 2 (eval-elsewhere): eval-elsewhere played other tasks than eval-solver');
    const one = await esopt('evals', 'compare', 'eval-solver');
    expect(one.code).toBe(2);
    expect(one.err).toContain('give at least 2 evaluation ids or result files');
    const broken = join(dir, 'broken.json');
    writeFileSync(broken, JSON.stringify({ version: 2, evaluation: 'x' }));
    const notAFile = await esopt('evals', 'compare', 'eval-solver', broken);
    expect(notAFile.code).toBe(2);
    expect(notAFile.err).toContain(`argument 2: ${broken} is not a result file (version 1): version:`);
    const unknown = await esopt('evals', 'compare', 'eval-solver', 'eval-missing');
    expect(unknown.code).toBe(1);
    expect(unknown.err).toContain('GET /evaluations/eval-missing/result → HTTP 404');
  });
});
