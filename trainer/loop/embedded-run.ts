/**
 * The embedded default: everything in one process tree on this machine. A filesystem store under the
 * store root, the engine and its inference server on a loopback port, the local worker pool running the
 * Episode function against that server, the ES loop, then the report and the curve written next to the
 * run's records.
 */
import { join } from 'node:path';
import { keys } from '../../shared/keys.ts';
import type { RunConfig } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { loadEnvironment } from '../../environments/index.ts';
import { LocalFanout } from '../fanout/local.ts';
import { createEngine } from '../model/create-engine.ts';
import { startInferenceServer } from '../server/server.ts';
import { renderCurveSvg } from './curve-svg.ts';
import type { FaultHook } from './fault-points.ts';
import type { TrainingProgress } from './progress.ts';
import { buildReport, type TrainingReport } from './report.ts';
import { train, type TrainingResult } from './training.ts';

export interface EmbeddedRunOptions {
  config: RunConfig;
  run: string;
  storeRoot: string;
  progress: TrainingProgress;
  /** Bearer token for the server; workers get it through ESOPT_TOKEN. */
  token?: string;
  faults?: FaultHook;
  pollMs?: number;
  executionProvider?: 'cpu' | 'cuda';
}

export interface EmbeddedRunResult {
  report: TrainingReport;
  result: TrainingResult;
}

export async function runEmbedded(o: EmbeddedRunOptions): Promise<EmbeddedRunResult> {
  const { config, run, storeRoot } = o;
  const store = new FsObjectStore(storeRoot);
  const environment = await loadEnvironment(config.environment.name);
  // Multi-turn episodes outgrow small contexts; the policy then sees the newest tokens (the current state).
  const engine = await createEngine({ model: config.model, mode: config.mode, contextPolicy: 'truncate-left', executionProvider: o.executionProvider });
  const server = await startInferenceServer(engine, { token: o.token, requestTimeoutMs: config.deadlineMs, contextPolicy: 'truncate-left' });
  const fanout = new LocalFanout({ workers: config.workers, store: { kind: 'fs', root: storeRoot }, env: o.token ? { ESOPT_TOKEN: o.token } : {} });
  try {
    // Workers take a moment to load; start them before the clock of the first iteration runs.
    await fanout.warm();
    const result = await train({
      run,
      config,
      store,
      fanout,
      weights: engine,
      population: server.service,
      policy: config.policy === 'model' ? { baseUrl: `${server.url}/v1`, ...(o.token ? { tokenEnv: 'ESOPT_TOKEN' } : {}) } : { baseUrl: config.policy },
      environment,
      pollMs: o.pollMs,
      faults: o.faults,
      onStart: (s) => o.progress.start(s.resumedAt),
      onIteration: (row) => o.progress.iteration(row),
      onEvaluation: (e) => o.progress.evaluation(e),
    });
    o.progress.stop();
    const files = { report: join(storeRoot, keys.report(run)), curve: join(storeRoot, keys.curve(run)) };
    const report = buildReport(config, result, files);
    await store.put(keys.curve(run), renderCurveSvg(`esopt run ${run}: ${config.environment.name}`, result.rows, result.evaluations), { contentType: 'image/svg+xml' });
    await store.put(keys.report(run), JSON.stringify(report, null, 2), { contentType: 'application/json' });
    return { report, result };
  } finally {
    o.progress.stop();
    await fanout.close();
    await server.close();
    await engine.close();
  }
}
