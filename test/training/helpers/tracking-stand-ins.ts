/**
 * Stand-ins, on 127.0.0.1, for the two tracking services a run can log to — NOT the services themselves:
 *
 * - `startMlflowStandIn`: a stand-in for MLflow's REST API (the endpoints esopt calls: experiments/get-by-name
 *   and create, runs/create, runs/log-batch with MLflow's batch limits, runs/update), checking the bearer token
 *   when it is given one;
 * - `startWandbStandIn`: a stand-in for Weights & Biases' server as its client uses it (the GraphQL
 *   `upsertBucket` mutation and the run's file_stream endpoint), checking HTTP Basic `api:<key>`.
 *
 * Both record every request as it arrived, for the tests to assert on. `mode` makes them misbehave: `fail`
 * answers 500 to everything, `hang` never answers, `hostile` answers errors that echo the request's
 * Authorization header and key back (what a redacting client must not pass on).
 */
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';

export type StandInMode = 'ok' | 'fail' | 'hang' | 'hostile';

/** The parsed JSON body of the request, set by the recording middleware. */
type Env = { Variables: { body: any } };

export interface Recorded {
  method: string;
  path: string;
  authorization: string | undefined;
  body: unknown;
}

interface StandIn {
  url: string;
  requests: Recorded[];
  close(): Promise<void>;
}

async function listen(app: Hono<Env>): Promise<{ url: string; close(): Promise<void> }> {
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise((resolve) => {
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}

/** A request recorded, then answered per `mode`; null means "go on and answer normally". */
function misbehave(app: Hono<Env>, requests: Recorded[], mode: () => StandInMode, secretOf: (auth: string) => string) {
  app.use('*', async (c, next) => {
    const text = c.req.method === 'GET' ? '' : await c.req.text();
    let body: unknown = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = text;
    }
    const url = new URL(c.req.url);
    requests.push({ method: c.req.method, path: `${url.pathname}${url.search}`, authorization: c.req.header('authorization'), body });
    c.set('body', body);
    const m = mode();
    if (m === 'fail') return c.json({ error_code: 'INTERNAL_ERROR', message: 'stand-in failing on purpose' }, 500);
    if (m === 'hang') return new Promise<Response>(() => {});
    if (m === 'hostile') {
      const auth = c.req.header('authorization') ?? '';
      return c.json({ error_code: 'UNAUTHENTICATED', message: `refused ${auth} (secret ${secretOf(auth)})`, errors: [{ message: `bad key ${secretOf(auth)}` }] }, 401);
    }
    await next();
  });
}

export interface MlflowMetric {
  key: string;
  value: number;
  timestamp: number;
  step: number;
}

export interface MlflowStandIn extends StandIn {
  experiments: Map<string, string>;
  runs: Map<string, { experimentId: string; runName: string; tags: unknown; status: string; endTime?: number; metrics: MlflowMetric[]; params: Array<{ key: string; value: string }> }>;
  mode: StandInMode;
}

export async function startMlflowStandIn(o: { token?: string; mode?: StandInMode } = {}): Promise<MlflowStandIn> {
  const requests: Recorded[] = [];
  const experiments = new Map<string, string>([['Default', '0']]);
  const runs: MlflowStandIn['runs'] = new Map();
  const state = { mode: o.mode ?? 'ok' } as { mode: StandInMode };
  const app = new Hono<Env>();
  misbehave(app, requests, () => state.mode, (auth) => auth.replace(/^Bearer /, ''));
  app.use('/api/2.0/mlflow/*', async (c, next) => {
    if (o.token && c.req.header('authorization') !== `Bearer ${o.token}`) return c.json({ error_code: 'UNAUTHENTICATED', message: 'bad token' }, 401);
    await next();
  });
  app.get('/api/2.0/mlflow/experiments/get-by-name', (c) => {
    const name = c.req.query('experiment_name') ?? '';
    const id = experiments.get(name);
    if (id === undefined) return c.json({ error_code: 'RESOURCE_DOES_NOT_EXIST', message: `Could not find experiment with name '${name}'` }, 404);
    return c.json({ experiment: { experiment_id: id, name, lifecycle_stage: 'active' } });
  });
  app.post('/api/2.0/mlflow/experiments/create', (c) => {
    const name = String(c.get('body').name ?? '');
    if (!name) return c.json({ error_code: 'INVALID_PARAMETER_VALUE', message: 'name' }, 400);
    if (experiments.has(name)) return c.json({ error_code: 'RESOURCE_ALREADY_EXISTS', message: name }, 400);
    const id = String(100 + experiments.size);
    experiments.set(name, id);
    return c.json({ experiment_id: id });
  });
  app.post('/api/2.0/mlflow/runs/create', (c) => {
    const b = c.get('body');
    const id = `run${runs.size + 1}`;
    runs.set(id, { experimentId: String(b.experiment_id), runName: String(b.run_name), tags: b.tags, status: 'RUNNING', metrics: [], params: [] });
    return c.json({ run: { info: { run_id: id, run_uuid: id, experiment_id: b.experiment_id, run_name: b.run_name, status: 'RUNNING', start_time: b.start_time }, data: {} } });
  });
  app.post('/api/2.0/mlflow/runs/log-batch', (c) => {
    const b = c.get('body') as { run_id: string; metrics?: MlflowMetric[]; params?: Array<{ key: string; value: string }> };
    const run = runs.get(b.run_id);
    if (!run) return c.json({ error_code: 'RESOURCE_DOES_NOT_EXIST', message: b.run_id }, 404);
    const metrics = b.metrics ?? [];
    const params = b.params ?? [];
    // MLflow's LogBatch limits
    if (metrics.length > 1000 || params.length > 100 || metrics.length + params.length > 1000) return c.json({ error_code: 'INVALID_PARAMETER_VALUE', message: 'batch too large' }, 400);
    for (const m of metrics) {
      if (typeof m.key !== 'string' || typeof m.value !== 'number' || !Number.isInteger(m.timestamp) || !Number.isInteger(m.step)) return c.json({ error_code: 'INVALID_PARAMETER_VALUE', message: 'metric' }, 400);
    }
    for (const p of params) {
      if (typeof p.key !== 'string' || typeof p.value !== 'string' || p.value.length > 6000) return c.json({ error_code: 'INVALID_PARAMETER_VALUE', message: 'param' }, 400);
    }
    run.metrics.push(...metrics);
    run.params.push(...params);
    return c.json({});
  });
  app.post('/api/2.0/mlflow/runs/update', (c) => {
    const b = c.get('body');
    const run = runs.get(String(b.run_id));
    if (!run) return c.json({ error_code: 'RESOURCE_DOES_NOT_EXIST', message: String(b.run_id) }, 404);
    run.status = String(b.status);
    run.endTime = Number(b.end_time);
    return c.json({ run_info: { run_id: b.run_id, status: run.status, end_time: run.endTime } });
  });
  const s = await listen(app);
  return {
    ...s,
    requests,
    experiments,
    runs,
    get mode() {
      return state.mode;
    },
    set mode(m: StandInMode) {
      state.mode = m;
    },
  };
}

export interface WandbStandIn extends StandIn {
  upserts: Array<{ query: string; variables: Record<string, unknown> }>;
  /** Per `<entity>/<project>/<run>`: the history file's lines as written at their offsets, the summary, the end. */
  files: Map<string, { history: string[]; offsets: number[]; summary: string[]; heartbeats: number; complete?: boolean; exitcode?: number }>;
}

export async function startWandbStandIn(o: { apiKey: string; defaultEntity?: string; mode?: StandInMode; historyLineCount?: number }): Promise<WandbStandIn> {
  const requests: Recorded[] = [];
  const upserts: WandbStandIn['upserts'] = [];
  const files: WandbStandIn['files'] = new Map();
  const expected = `Basic ${Buffer.from(`api:${o.apiKey}`).toString('base64')}`;
  const app = new Hono<Env>();
  misbehave(app, requests, () => o.mode ?? 'ok', (auth) => Buffer.from(auth.replace(/^Basic /, ''), 'base64').toString().replace(/^api:/, ''));
  app.use('*', async (c, next) => {
    if (c.req.header('authorization') !== expected) return c.json({ error: 'unauthorized' }, 401);
    await next();
  });
  app.post('/graphql', (c) => {
    const { query, variables } = c.get('body') as { query: string; variables: Record<string, unknown> };
    if (!/mutation\s+UpsertBucket/.test(query) || !/upsertBucket\s*\(\s*input\s*:/.test(query)) return c.json({ errors: [{ message: 'unknown operation' }] });
    upserts.push({ query, variables });
    const entity = (variables.entity as string | null) ?? o.defaultEntity ?? 'stand-in-entity';
    return c.json({
      data: {
        upsertBucket: {
          bucket: { id: 'UnVuOjE=', name: variables.name, displayName: variables.displayName, project: { id: 'UHJvamVjdDox', name: variables.project, entity: { id: 'RW50aXR5OjE=', name: entity } }, historyLineCount: o.historyLineCount ?? 0 },
          inserted: true,
        },
      },
    });
  });
  app.post('/files/:entity/:project/:run/file_stream', (c) => {
    const key = `${c.req.param('entity')}/${c.req.param('project')}/${c.req.param('run')}`;
    const f = files.get(key) ?? { history: [], offsets: [], summary: [], heartbeats: 0 };
    files.set(key, f);
    const b = c.get('body') as { files?: Record<string, { offset: number; content: string[] }>; complete?: boolean; exitcode?: number };
    if (!b.files && b.complete === undefined) f.heartbeats++;
    for (const [name, chunk] of Object.entries(b.files ?? {})) {
      const lines = name === 'wandb-history.jsonl' ? f.history : name === 'wandb-summary.json' ? f.summary : null;
      if (!lines) return c.json({ error: `unknown file ${name}` }, 400);
      if (name === 'wandb-history.jsonl') f.offsets.push(chunk.offset);
      chunk.content.forEach((line, i) => (lines[chunk.offset + i] = line));
    }
    if (b.complete !== undefined) {
      f.complete = b.complete;
      f.exitcode = b.exitcode;
    }
    return c.json({ exitcode: null, limits: {} });
  });
  const s = await listen(app);
  return { ...s, requests, upserts, files };
}
