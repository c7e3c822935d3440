/**
 * The run wiring `esopt train` (and `start`, the local API, the demo) uses: the engine and its inference
 * server, a {store, fanout} site (assembly/site.ts), the ES loop, then the report and the curve written
 * next to the run's records. The embedded default site is everything in one process tree on this
 * machine: a filesystem store under the store root and the local worker pool running the Episode
 * function against the server on a loopback port. A cloud site (an S3 bucket and the Episode Lambda)
 * goes through exactly the same wiring.
 */
import { noiseField } from '../../shared/noise-definition.ts';
import { keys } from '../../shared/keys.ts';
import { writeJson } from '../../shared/store/json.ts';
import type { ModelSpec, RunConfig } from '../../shared/schemas/index.ts';
import { loadEnvironment } from '../../environments/index.ts';
import { localSite } from './local-site.ts';
import { embeddedWiring } from './wirings.ts';
import { openEngine, serveEngine } from './engine.ts';
import { resolveModelSpec } from '../training/model-store/resolve-model.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import type { Engine, EngineOptions } from '../engine/engine.ts';
import type { RunningServer, ServerOptions } from '../serving/server.ts';
import type { TlsIdentity } from '../serving/tls-identity.ts';
import { renderCurveSvg } from '../training/loop/index.ts';
import type { FaultHook } from '../training/loop/index.ts';
import type { TrainingProgress } from '../training/loop/index.ts';
import { buildReport, type TrainingReport } from '../training/loop/index.ts';
import type { Site } from './site.ts';
import { train, type TrainingResult } from '../training/loop/index.ts';
import { ReplicaSet } from '../training/loop/index.ts';
import { acquireCoordinatorLease, type HeldLease } from '../training/loop/index.ts';
import type { ExecutionProvider } from '../../shared/execution-provider.ts';
import { openRunMetrics, stderrLog, type MetricsLog, type MetricsSink, type RunMetrics, type RunOutcome } from '../training/metrics/index.ts';
import type { HttpOptions } from '../training/metrics/http.ts';

interface RunOptionsCommon {
  config: RunConfig;
  run: string;
  progress: TrainingProgress;
  /** Bearer token for the server; local workers get it through ESOPT_TOKEN. */
  token?: string;
  /** Where the inference server listens; `tls`: over HTTPS with that identity (the trainer box's). */
  server?: { host?: string; port?: number; tls?: TlsIdentity };
  faults?: FaultHook;
  pollMs?: number;
  executionProvider?: ExecutionProvider;
  /**
   * Share the members' inference with trainer replicas (trainer/jobs/replica.ts) that follow this run
   * in the same store; they are started separately and found through their announcements.
   */
  replicas?: { syncTimeoutMs: number; expected?: number; onLost?: (info: { iteration: number; replica: string }) => void; leaseTtlMs?: number };
  /**
   * Where the run's metrics go besides its rows (trainer/training/metrics/): TensorBoard files in the store
   * always, MLflow and W&B when `env` (default process.env) names them; `log` (default stderr) hears a sink's
   * failure, once; `sinks` are added to those.
   */
  metrics?: { env?: Record<string, string | undefined>; log?: MetricsLog; http?: HttpOptions; sinks?: readonly MetricsSink[] };
}

/**
 * Either `storeRoot` (the embedded default site over that directory) or a `site` the run takes
 * over: it is warmed before the first iteration and closed when the run ends.
 */
export type EmbeddedRunOptions = RunOptionsCommon & ({ storeRoot: string; site?: never } | { site: Site; storeRoot?: never });

export interface EmbeddedRunResult {
  report: TrainingReport;
  result: TrainingResult;
}

export interface ServedEngine {
  engine: Engine;
  server: RunningServer;
  close(): Promise<void>;
}

/** How `serveSpec` opens the engine and its server: everything but the model, which it resolves itself. */
export interface ServeSpecOptions {
  /** Where a named model is read from (and cached on this machine first). */
  models?: ObjectStore;
  engine: Omit<EngineOptions, 'model' | 'contextPolicy'>;
  server: Omit<ServerOptions, 'contextPolicy'>;
  /** Done to the engine before the server opens (a checkpoint loaded into θ); a throw closes the engine. */
  prepare?(engine: Engine): Promise<void>;
}

/**
 * A model spec served: the engine for it (a named model resolved through `models`) and the OpenAI-compatible
 * server in front; close() closes both. The one place an engine and its server are put together, for a
 * run (`serveModel`) and for the API's and the box's ModelServer (trainer/jobs/model-server.ts).
 */
export async function serveSpec(spec: ModelSpec, o: ServeSpecOptions): Promise<ServedEngine> {
  const model = await resolveModelSpec(spec, o.models);
  // Multi-turn episodes outgrow small contexts; the policy then sees the newest tokens (the current state).
  const engine = await openEngine({ ...o.engine, model, contextPolicy: 'truncate-left' });
  try {
    await o.prepare?.(engine);
    const server = await serveEngine(engine, { ...o.server, contextPolicy: 'truncate-left' });
    return {
      engine,
      server,
      async close() {
        await server.close();
        await engine.close();
      },
    };
  } catch (err) {
    await engine.close();
    throw err;
  }
}

/**
 * A run's inference side: the engine holding θ and the OpenAI-compatible server in front of it. A named
 * model is read from `models` (the run's store) and cached on this machine first.
 */
export async function serveModel(config: RunConfig, o: Pick<RunOptionsCommon, 'token' | 'server' | 'executionProvider'> & { models?: ObjectStore } = {}): Promise<ServedEngine> {
  return serveSpec(config.model, {
    models: o.models,
    engine: { mode: config.mode, fullModeWeights: config.fullModeWeights, ...noiseField(config.noise), ...(config.lora ? { lora: { ...config.lora, seed: config.seed } } : {}), executionProvider: o.executionProvider },
    server: { token: o.token, requestTimeoutMs: config.deadlineMs, host: o.server?.host, port: o.server?.port, tls: o.server?.tls },
  });
}

export async function runEmbedded(o: EmbeddedRunOptions): Promise<EmbeddedRunResult> {
  const { config, run } = o;
  const site = o.site ?? localSite(o.storeRoot, config, o.token);
  const { store, fanout } = site;
  let served: ServedEngine | undefined;
  let lease: HeldLease | undefined;
  let metrics: RunMetrics | undefined;
  let outcome: RunOutcome = 'failed';
  try {
    // With replicas, one coordinator per run: a second trainer of this run stops here (coordinator-lease.ts).
    if (o.replicas) lease = await acquireCoordinatorLease(store, run, { ttlMs: o.replicas.leaseTtlMs ?? 60_000 });
    const environment = await loadEnvironment(config.environment.name);
    served = await serveModel(config, { ...o, models: store });
    const { engine, server } = served;
    const endpoint = site.policyEndpoint ?? { baseUrl: `${server.url}/v1`, ...(o.token ? { tokenEnv: 'ESOPT_TOKEN' } : {}) };
    site.useEngine?.(engine);
    // Workers take a moment to load; start them before the clock of the first iteration runs.
    await site.warm?.();
    if (o.replicas && config.policy !== 'model') throw new Error(`replicas serve the model's members; this run's policy is ${config.policy}`);
    const replicas = o.replicas
      ? new ReplicaSet({ store, run, self: { id: 'coordinator', baseUrl: endpoint.baseUrl }, syncTimeoutMs: o.replicas.syncTimeoutMs, expected: o.replicas.expected, pollMs: o.pollMs ?? 50, onLost: o.replicas.onLost, lease })
      : undefined;
    // Watching the run never stops it: a sink's failure is logged once and the sink is off (metrics/sink.ts).
    const watch = openRunMetrics({ store, run, config, env: o.metrics?.env, log: o.metrics?.log ?? stderrLog, http: o.metrics?.http, extra: o.metrics?.sinks });
    metrics = watch;
    const result = await train({
      replicas,
      run,
      config,
      store,
      fanout,
      weights: engine,
      population: server.service,
      policy: config.policy === 'model' ? endpoint : { baseUrl: config.policy },
      environment,
      pollMs: o.pollMs,
      faults: o.faults,
      onStart: (s) => o.progress.start(s.resumedAt),
      onIteration: (row) => {
        o.progress.iteration(row);
        watch.iteration(row);
      },
      onEvaluation: (e) => {
        o.progress.evaluation(e);
        watch.evaluation(e);
      },
    });
    outcome = 'finished';
    o.progress.stop();
    const files = { report: site.locate(keys.report(run)), curve: site.locate(keys.curve(run)) };
    const report = buildReport(config, result, files);
    await store.put(keys.curve(run), renderCurveSvg(`esopt run ${run}: ${config.environment.name}`, result.rows, result.evaluations), { contentType: 'image/svg+xml' });
    await writeJson(store, keys.report(run), report, false, { pretty: true });
    return { report, result };
  } finally {
    o.progress.stop();
    // before the site closes: the TensorBoard file goes to its store
    await metrics?.close(outcome);
    await lease?.release();
    await site.close();
    await served?.close();
  }
}

/** What a study's other method (random search, GRPO) plays its episodes with: the parts `runEmbedded` uses. */
export interface StudyRun extends ServedEngine {
  site: Site;
}

/**
 * The run's model served as `runEmbedded` serves it and the local site over `storeRoot` (the embedded
 * wiring's), the engine handed to the site; close() releases both. A study compares ES with another method
 * on exactly the parts an ES run of the same config gets.
 */
export async function openStudyRun(config: RunConfig, storeRoot: string): Promise<StudyRun> {
  const served = await serveModel(config);
  try {
    const { site } = await embeddedWiring(storeRoot, undefined).open(config);
    site.useEngine?.(served.engine);
    return {
      ...served,
      site,
      async close() {
        await site.close();
        await served.close();
      },
    };
  } catch (err) {
    await served.close();
    throw err;
  }
}
