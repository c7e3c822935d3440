/**
 * MLflow and Weights & Biases, against stand-ins on 127.0.0.1 (helpers/tracking-stand-ins.ts; not the real
 * services): a real short run configured by ESOPT_MLFLOW_* and ESOPT_WANDB_* logs every row and evaluation
 * (steps, keys, values as the stored records), its config, and its end (FINISHED / exit code 0; FAILED / 1
 * when the run fails); a failing, hanging or hostile server is logged once per sink and the run finishes; the
 * W&B key and the MLflow token appear in no log line and no stored file, even when a server echoes them back.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { EvaluationResult, MetricsRow, RunConfig, type RunConfigInput } from '../../shared/schemas/index.ts';
import { runEmbedded } from '../../trainer/assembly/run.ts';
import { silentProgress } from '../../trainer/training/loop/index.ts';
import { metricsSinks, WandbSink } from '../../trainer/training/metrics/index.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { startMlflowStandIn, startWandbStandIn, type MlflowMetric, type MlflowStandIn, type WandbStandIn } from './helpers/tracking-stand-ins.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-trackers-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const TOKEN = 'mlflow-token-7c1e9a44d2b8';
const API_KEY = 'wandbkey0123456789abcdef0123456789abcdef';
const BASIC = Buffer.from(`api:${API_KEY}`).toString('base64');
const SECRETS = [TOKEN, API_KEY, BASIC];

const config: RunConfigInput = {
  environment: { name: 'sudoku', options: { size: 4, blanks: 4, shapedReward: true, invalidMove: 'waste' } },
  tasks: { seed: 3, trainPerIteration: 2, evalCount: 2 },
  model: { preset: 'tiny', seed: 1 },
  es: { population: 4, sigma: 0.05, alpha: 0.05 },
  iterations: 3,
  evalInterval: 2,
  checkpointInterval: 100,
  policy: 'scripted:random',
  localEpisodes: 'in-process',
  workers: 2,
  deadlineMs: 60_000,
  seed: 11,
};

const servers: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

function envFor(mlflow: MlflowStandIn, wandb: WandbStandIn): Record<string, string> {
  return {
    ESOPT_MLFLOW_TRACKING_URI: mlflow.url,
    ESOPT_MLFLOW_EXPERIMENT: 'esopt-tests',
    ESOPT_MLFLOW_TOKEN: TOKEN,
    ESOPT_WANDB_API_KEY: API_KEY,
    ESOPT_WANDB_PROJECT: 'esopt',
    ESOPT_WANDB_BASE_URL: wandb.url,
  };
}

function stored<T>(storeRoot: string, run: string, dir: string, schema: { parse(x: unknown): T }): T[] {
  const d = join(storeRoot, 'runs', run, dir);
  return readdirSync(d)
    .sort()
    .map((f) => schema.parse(JSON.parse(readFileSync(join(d, f), 'utf8'))));
}

/** The row's numbers by the tag each carries (written out here, not taken from the writer). */
function rowValues(r: MetricsRow): Record<string, number> {
  const all: Record<string, number | null | undefined> = {
    'reward/mean': r.meanReward, 'reward/max': r.maxReward, 'train/success_rate': r.successRate,
    'episodes/expected': r.expected, 'episodes/counted': r.counted, 'episodes/failed': r.failed, 'episodes/invalid': r.invalid,
    'episodes/missing': r.missing, 'episodes/timed_out': r.timedOut, 'es/sigma': r.sigma, 'es/alpha': r.alpha,
    'tokens/prompt': r.tokens.prompt, 'tokens/completion': r.tokens.completion,
    'cost/usd': r.cost.usd, 'cost/lambda_gb_seconds': r.cost.lambdaGbSeconds, 'cost/gpu_seconds': r.cost.gpuSeconds,
    'time_ms/manifest': r.durations.manifest, 'time_ms/episodes': r.durations.episodes, 'time_ms/collect': r.durations.collect,
    'time_ms/update': r.durations.update, 'time_ms/checkpoint': r.durations.checkpoint, 'time_ms/total': r.durations.total,
    'spent/usd': r.spent?.usd, 'spent/episodes': r.spent?.episodes, 'spent/wall_ms': r.spent?.wallMs,
  };
  return Object.fromEntries(Object.entries(all).filter((e): e is [string, number] => typeof e[1] === 'number'));
}

function evaluationValues(e: EvaluationResult): Record<string, number> {
  return {
    'eval/success_rate': e.successRate, 'eval/success_rate_lower': e.interval.low, 'eval/success_rate_upper': e.interval.high,
    'eval/mean_reward': e.meanReward, 'eval/tasks': e.tasks, 'eval/successes': e.successes, 'eval/failed': e.failed, 'eval/duration_ms': e.durationMs,
  };
}

/** Every stored file of the store, read whole: the secrets are in none of them. */
function expectNoSecretsStored(storeRoot: string): void {
  const walk = (d: string): string[] => readdirSync(d).flatMap((n) => (statSync(join(d, n)).isDirectory() ? walk(join(d, n)) : [join(d, n)]));
  const files = walk(storeRoot);
  expect(files.length).toBeGreaterThan(10);
  for (const f of files) {
    const bytes = readFileSync(f);
    for (const s of SECRETS) expect(bytes.includes(Buffer.from(s)), `${s} in ${f}`).toBe(false);
  }
}

function expectNoSecretsIn(lines: string[]): void {
  for (const l of lines) for (const s of SECRETS) expect(l).not.toContain(s);
}

describe('MLflow and W&B sinks (stand-in servers)', () => {
  it('a real run logs its rows, evaluations, config and end to both, through their APIs', async () => {
    const mlflow = await startMlflowStandIn({ token: TOKEN });
    const wandb = await startWandbStandIn({ apiKey: API_KEY, defaultEntity: 'team-x' });
    servers.push(mlflow, wandb);
    const storeRoot = join(root, 'ok');
    const logged: string[] = [];
    await runEmbedded({ config: RunConfig.parse(config), run: 'tracked', storeRoot, progress: silentProgress, metrics: { env: envFor(mlflow, wandb), log: (l) => logged.push(l) } });
    expect(logged).toEqual([]);
    const rows = stored(storeRoot, 'tracked', 'metrics', MetricsRow);
    const evaluations = stored(storeRoot, 'tracked', 'evaluations', EvaluationResult);
    expect(rows.map((r) => r.iteration)).toEqual([0, 1, 2]);
    expect(evaluations.map((e) => e.iteration)).toEqual([0, 2, 3]);

    // MLflow: the experiment looked up, then created; one run; the config as params; a batch per row and evaluation.
    expect(mlflow.requests.every((r) => r.authorization === `Bearer ${TOKEN}`)).toBe(true);
    expect(mlflow.requests.slice(0, 3).map((r) => `${r.method} ${r.path}`)).toEqual([
      'GET /api/2.0/mlflow/experiments/get-by-name?experiment_name=esopt-tests',
      'POST /api/2.0/mlflow/experiments/create',
      'POST /api/2.0/mlflow/runs/create',
    ]);
    expect(mlflow.runs.size).toBe(1);
    const run = [...mlflow.runs.values()][0];
    expect(run.experimentId).toBe(mlflow.experiments.get('esopt-tests'));
    expect(run.runName).toBe('tracked');
    expect(run.status).toBe('FINISHED');
    expect(run.endTime).toBeGreaterThan(0);
    const params = Object.fromEntries(run.params.map((p) => [p.key, p.value]));
    expect(run.params.length).toBe(Object.keys(params).length);
    expect(params).toMatchObject({ 'environment.name': 'sudoku', 'environment.options.size': '4', 'es.population': '4', 'es.sigma': '0.05', iterations: '3', policy: 'scripted:random' });
    const metricBatches = mlflow.requests.filter((r) => r.path.endsWith('/runs/log-batch') && (r.body as { metrics?: unknown[] }).metrics);
    expect(metricBatches).toHaveLength(rows.length + evaluations.length);
    const at = (step: number, evalKeys: boolean) =>
      Object.fromEntries(run.metrics.filter((m) => m.step === step && m.key.startsWith('eval/') === evalKeys).map((m) => [m.key, m.value]));
    for (const r of rows) {
      expect(at(r.iteration, false)).toEqual(rowValues(r));
      const ts = new Set(run.metrics.filter((m: MlflowMetric) => m.step === r.iteration && !m.key.startsWith('eval/')).map((m) => m.timestamp));
      expect([...ts]).toEqual([Date.parse(r.finishedAt)]);
    }
    for (const e of evaluations) expect(at(e.iteration, true)).toEqual(evaluationValues(e));
    expect([...new Set(run.metrics.filter((m) => m.key.startsWith('eval/')).map((m) => m.step))]).toEqual([0, 2, 3]);

    // W&B: the run upserted, the entity taken from the answer, one history line per step, the end.
    expect(wandb.requests.every((r) => r.authorization === `Basic ${BASIC}`)).toBe(true);
    expect(wandb.upserts).toHaveLength(1);
    const v = wandb.upserts[0].variables;
    expect(v).toMatchObject({ name: 'tracked', project: 'esopt', entity: null });
    expect(JSON.parse(String(v.config)).es.value.population).toBe(4);
    expect([...wandb.files.keys()]).toEqual(['team-x/esopt/tracked']);
    const f = wandb.files.get('team-x/esopt/tracked')!;
    const lines = f.history.map((l) => JSON.parse(l) as Record<string, number>);
    expect(f.offsets).toEqual([0, 1, 2, 3]);
    expect(lines.map((l) => l._step)).toEqual([0, 1, 2, 3]);
    const strip = (l: Record<string, number>, evalKeys: boolean) => Object.fromEntries(Object.entries(l).filter(([k]) => !k.startsWith('_') && k.startsWith('eval/') === evalKeys));
    for (const r of rows) {
      expect(strip(lines[r.iteration], false)).toEqual(rowValues(r));
      expect(lines[r.iteration]._timestamp).toBe(Date.parse(r.finishedAt) / 1000);
    }
    // each evaluation in the line of its step (θ_k's evaluation with iteration k's row; the final one alone)
    for (const e of evaluations) expect(strip(lines[e.iteration], true)).toEqual(evaluationValues(e));
    expect(strip(lines[1], true)).toEqual({});
    expect(strip(lines[3], false)).toEqual({});
    expect(lines.every((l, i) => i === 0 || l._runtime >= lines[i - 1]._runtime)).toBe(true);
    expect(JSON.parse(f.summary[0])).toMatchObject({ _step: 3, 'reward/mean': rows[2].meanReward, 'eval/success_rate': evaluations[2].successRate });
    expect(f.complete).toBe(true);
    expect(f.exitcode).toBe(0);

    expectNoSecretsStored(storeRoot);
  }, 120_000);

  it('a run that fails ends FAILED in MLflow and with exit code 1 in W&B, and still fails as it did', async () => {
    const mlflow = await startMlflowStandIn({ token: TOKEN });
    const wandb = await startWandbStandIn({ apiKey: API_KEY, defaultEntity: 'team-x' });
    servers.push(mlflow, wandb);
    const logged: string[] = [];
    const run = runEmbedded({
      config: RunConfig.parse(config),
      run: 'crashes',
      storeRoot: join(root, 'fails'),
      progress: silentProgress,
      faults: (point, k) => {
        if (point === 'after-update' && k === 1) throw new Error('injected failure');
      },
      metrics: { env: envFor(mlflow, wandb), log: (l) => logged.push(l) },
    });
    await expect(run).rejects.toThrow('injected failure');
    expect(logged).toEqual([]);
    expect([...mlflow.runs.values()].map((r) => r.status)).toEqual(['FAILED']);
    const f = wandb.files.get('team-x/esopt/crashes')!;
    expect(f.history.map((l) => JSON.parse(l)._step)).toEqual([0]);
    expect(f.exitcode).toBe(1);
  }, 120_000);

  it('hostile, failing and hanging servers: one line per sink, no secret in it, and the run finishes', async () => {
    const cases = [
      { mlflowMode: 'hostile', wandbMode: 'hostile', expect: [/mlflow failed.*HTTP 401/, /wandb failed.*HTTP 401/] },
      { mlflowMode: 'hang', wandbMode: 'fail', expect: [/mlflow failed.*no answer within 300 ms/, /wandb failed.*HTTP 500/] },
    ] as const;
    for (const [i, c] of cases.entries()) {
      const mlflow = await startMlflowStandIn({ token: TOKEN, mode: c.mlflowMode });
      const wandb = await startWandbStandIn({ apiKey: API_KEY, mode: c.wandbMode });
      servers.push(mlflow, wandb);
      const storeRoot = join(root, `bad-${i}`);
      const logged: string[] = [];
      const started = Date.now();
      const { result } = await runEmbedded({
        config: RunConfig.parse(config),
        run: `bad-${i}`,
        storeRoot,
        progress: silentProgress,
        metrics: { env: envFor(mlflow, wandb), log: (l) => logged.push(l), http: { timeoutMs: 300, retries: 1, backoffMs: 10 } },
      });
      expect(result.rows).toHaveLength(3);
      expect(Date.now() - started).toBeLessThan(30_000);
      expect(logged).toHaveLength(2);
      expect(logged.find((l) => l.includes('mlflow'))).toMatch(c.expect[0]);
      expect(logged.find((l) => l.includes('wandb'))).toMatch(c.expect[1]);
      expect(logged.every((l) => l.includes('the run goes on'))).toBe(true);
      if (c.mlflowMode === 'hostile') {
        // the servers did echo the credentials back: what reached the log was redacted
        expect(logged.join('\n')).toContain('[redacted]');
      }
      // the retries were made, then the sink stopped calling (nothing after the first failure)
      expect(mlflow.requests.length).toBeLessThanOrEqual(2);
      expect(wandb.requests.length).toBeLessThanOrEqual(2);
      expectNoSecretsIn(logged);
      expectNoSecretsStored(storeRoot);
      expect(readdirSync(join(storeRoot, 'runs', `bad-${i}`, 'tensorboard'))).toHaveLength(1);
    }
  }, 120_000);

  it('settings that cannot work are logged without their secrets, and the sink is left out', () => {
    const store = { put: async () => true } as unknown as ObjectStore;
    const logged: string[] = [];
    const c = RunConfig.parse(config);
    const only = (env: Record<string, string>) => metricsSinks({ store, run: 'r', config: c, env, log: (l) => logged.push(l) }).map((s) => s.name);
    expect(only({})).toEqual(['tensorboard']);
    expect(only({ ESOPT_WANDB_API_KEY: API_KEY })).toEqual(['tensorboard']);
    expect(logged.pop()).toMatch(/wandb is off.*needs both ESOPT_WANDB_API_KEY and ESOPT_WANDB_PROJECT.*project is not set/);
    expect(only({ ESOPT_MLFLOW_TRACKING_URI: `https://user:${TOKEN}@mlflow.example` })).toEqual(['tensorboard']);
    expect(logged.pop()).toMatch(/mlflow is off.*must not hold credentials/);
    expect(only({ ESOPT_WANDB_API_KEY: API_KEY, ESOPT_WANDB_PROJECT: 'p', ESOPT_WANDB_BASE_URL: 'ftp://wandb.example' })).toEqual(['tensorboard']);
    expect(logged.pop()).toMatch(/wandb is off.*http\(s\) URL/);
    expect(only({ ESOPT_MLFLOW_TRACKING_URI: 'http://127.0.0.1:5000', ESOPT_WANDB_API_KEY: API_KEY, ESOPT_WANDB_PROJECT: 'p' })).toEqual(['tensorboard', 'mlflow', 'wandb']);
    expect(logged).toEqual([]);
    expectNoSecretsIn(logged);
  });

  it('W&B: a run the server already holds lines of appends after them; heartbeats while open, none after', async () => {
    const wandb = await startWandbStandIn({ apiKey: API_KEY, defaultEntity: 'team-x', historyLineCount: 5 });
    servers.push(wandb);
    const rows = stored(join(root, 'ok'), 'tracked', 'metrics', MetricsRow);
    const sink = new WandbSink({ apiKey: API_KEY, project: 'esopt', entity: 'me', baseUrl: wandb.url, run: 'tracked', config: RunConfig.parse(config), heartbeatMs: 30 });
    for (const r of rows.slice(1)) await sink.iteration(r);
    await new Promise((r) => setTimeout(r, 200));
    const f = wandb.files.get('me/esopt/tracked')!;
    expect(f.heartbeats).toBeGreaterThanOrEqual(2);
    expect(wandb.requests.filter((r) => JSON.stringify(r.body) === '{}').length).toBe(f.heartbeats);
    await sink.close('finished');
    const after = f.heartbeats;
    await new Promise((r) => setTimeout(r, 150));
    expect(f.heartbeats).toBe(after);
    expect(f.offsets).toEqual([5, 6]);
    expect(f.history.slice(5).map((l) => JSON.parse(l)._step)).toEqual([1, 2]);
    expect(wandb.upserts[0].variables.entity).toBe('me');
  });
});
