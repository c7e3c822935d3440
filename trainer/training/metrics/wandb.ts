/**
 * A run logged to Weights & Biases the way W&B's own client talks to its server (learned from the open-source
 * client, wandb/wandb: the GraphQL `UpsertBucket` mutation and core/internal/filestream):
 *
 * - the run is created (or found again: same name) with `upsertBucket` at `<base>/graphql`
 *   (`name` = the run id, `modelName` = project, `entityName` = entity, `config` as a JSON string of
 *   `{key: {value}}`); the answer says the entity and project the server settled on and `historyLineCount`,
 *   the history lines it already holds (a resumed run appends after them);
 * - metrics go to `POST <base>/files/<entity>/<project>/<run>/file_stream` as
 *   `{"files": {"wandb-history.jsonl": {"offset": <line number>, "content": [<JSON line>…]}}}`, one line per
 *   step with `_step`, `_timestamp` (seconds) and `_runtime`; the latest values also as `wandb-summary.json`
 *   (offset 0, one line); an empty `{}` is a heartbeat (the client sends one every 30 s so the server does
 *   not take the run for dead); `{"complete": true, "exitcode": n}` ends the run (0 finished, 1 failed);
 * - every request authenticates with HTTP Basic `api:<key>`.
 *
 * W&B wants `_step` to increase line by line, so an evaluation of θ_k (which arrives before iteration k's
 * row) is held and sent in the same line as that row; the final evaluation, which has no row, goes alone.
 */
import type { EvaluationResult, MetricsRow, RunConfig } from '../../../shared/schemas/index.ts';
import { requestJson, type HttpOptions } from './http.ts';
import { evaluationScalars, rowScalars, type Scalar } from './scalars.ts';
import type { MetricsSink, RunOutcome } from './sink.ts';

export interface WandbOptions {
  apiKey: string;
  project: string;
  /** Absent: the key's default entity, as the server answers it. */
  entity?: string;
  /** Default https://api.wandb.ai. */
  baseUrl?: string;
  run: string;
  config: RunConfig;
  http?: HttpOptions;
  /** Between heartbeats while the run is open (default 30 s, W&B's). */
  heartbeatMs?: number;
  now?: () => number;
}

export const WANDB_DEFAULT_BASE_URL = 'https://api.wandb.ai';
const HISTORY = 'wandb-history.jsonl';
const SUMMARY = 'wandb-summary.json';

const UPSERT_BUCKET = `mutation UpsertBucket($name: String, $project: String, $entity: String, $displayName: String, $config: JSONString) {
  upsertBucket(input: { name: $name, modelName: $project, entityName: $entity, displayName: $displayName, config: $config }) {
    bucket { id name project { name entity { name } } historyLineCount }
    inserted
  }
}`;

interface UpsertAnswer {
  data?: { upsertBucket?: { bucket?: { name?: string; historyLineCount?: number | null; project?: { name?: string; entity?: { name?: string } } } } };
  errors?: Array<{ message?: string }>;
}

export class WandbSink implements MetricsSink {
  readonly name = 'wandb';
  readonly secrets: readonly string[];
  private readonly base: string;
  private readonly headers: Record<string, string>;
  private readonly now: () => number;
  private readonly startedMs: number;
  private stream: { url: string; offset: number } | null = null;
  private pending: { step: number; scalars: Scalar[] } | null = null;
  private summary: Record<string, number> = {};
  private heartbeat: NodeJS.Timeout | null = null;

  constructor(private readonly o: WandbOptions) {
    const base = new URL(o.baseUrl ?? WANDB_DEFAULT_BASE_URL);
    if (base.username || base.password) throw new Error('ESOPT_WANDB_BASE_URL must not hold credentials: set ESOPT_WANDB_API_KEY');
    if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new Error(`ESOPT_WANDB_BASE_URL must be an http(s) URL, not ${base.protocol}`);
    this.base = (o.baseUrl ?? WANDB_DEFAULT_BASE_URL).replace(/\/+$/, '');
    const basic = Buffer.from(`api:${o.apiKey}`).toString('base64');
    this.headers = { authorization: `Basic ${basic}` };
    this.secrets = [o.apiKey, basic];
    this.now = o.now ?? Date.now;
    this.startedMs = this.now();
  }

  /** The run upserted and its file stream's URL, once. */
  private async ensureStream(): Promise<{ url: string; offset: number }> {
    if (this.stream) return this.stream;
    const config = Object.fromEntries(Object.entries(this.o.config).filter(([, v]) => v !== undefined).map(([k, v]) => [k, { value: v }]));
    const answer = (await requestJson(
      'POST',
      `${this.base}/graphql`,
      this.headers,
      { query: UPSERT_BUCKET, variables: { name: this.o.run, project: this.o.project, entity: this.o.entity ?? null, displayName: this.o.run, config: JSON.stringify(config) } },
      this.o.http,
    )) as UpsertAnswer;
    if (answer?.errors?.length) throw new Error(`W&B upsertBucket: ${answer.errors.map((e) => e.message ?? '?').join('; ').slice(0, 300)}`);
    const bucket = answer?.data?.upsertBucket?.bucket;
    const entity = bucket?.project?.entity?.name ?? this.o.entity;
    const project = bucket?.project?.name ?? this.o.project;
    const run = bucket?.name ?? this.o.run;
    if (!bucket || !entity) throw new Error('W&B upsertBucket answered without the run or its entity');
    const seg = encodeURIComponent;
    this.stream = { url: `${this.base}/files/${seg(entity)}/${seg(project)}/${seg(run)}/file_stream`, offset: bucket.historyLineCount ?? 0 };
    const every = this.o.heartbeatMs ?? 30_000;
    this.heartbeat = setInterval(() => {
      // A missed heartbeat is harmless; the next push or heartbeat says the run lives.
      requestJson('POST', this.stream!.url, this.headers, {}, { ...this.o.http, retries: 0 }).catch(() => {});
    }, every);
    this.heartbeat.unref();
    return this.stream;
  }

  private async push(step: number, scalars: readonly Scalar[], timestampMs: number): Promise<void> {
    const stream = await this.ensureStream();
    const values = Object.fromEntries(scalars.map((s) => [s.tag, s.value]));
    const line = { ...values, _step: step, _timestamp: timestampMs / 1000, _runtime: Math.max(0, (timestampMs - this.startedMs) / 1000) };
    const summary = { ...this.summary, ...line };
    await requestJson(
      'POST',
      stream.url,
      this.headers,
      { files: { [HISTORY]: { offset: stream.offset, content: [JSON.stringify(line)] }, [SUMMARY]: { offset: 0, content: [JSON.stringify(summary)] } } },
      this.o.http,
    );
    stream.offset += 1;
    this.summary = summary;
  }

  private async flushPending(): Promise<void> {
    if (!this.pending) return;
    const { step, scalars } = this.pending;
    this.pending = null;
    await this.push(step, scalars, this.now());
  }

  async evaluation(e: EvaluationResult): Promise<void> {
    if (this.pending && this.pending.step !== e.iteration) await this.flushPending();
    this.pending = { step: e.iteration, scalars: evaluationScalars(e) };
  }

  async iteration(row: MetricsRow): Promise<void> {
    let scalars = rowScalars(row);
    if (this.pending?.step === row.iteration) {
      scalars = [...scalars, ...this.pending.scalars];
      this.pending = null;
    } else if (this.pending && this.pending.step < row.iteration) await this.flushPending();
    await this.push(row.iteration, scalars, Date.parse(row.finishedAt));
  }

  async close(outcome: RunOutcome): Promise<void> {
    try {
      await this.flushPending();
      const stream = await this.ensureStream();
      await requestJson('POST', stream.url, this.headers, { complete: true, exitcode: outcome === 'finished' ? 0 : 1 }, this.o.http);
    } finally {
      this.abandon();
    }
  }

  abandon(): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
  }
}
