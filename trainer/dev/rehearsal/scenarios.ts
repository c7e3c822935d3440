/**
 * What a user does with a deployed stack, done against an Api URL: start a one-iteration run of an
 * environment with `esopt runs start` and follow it to its end, evaluate an external endpoint with
 * `esopt evals start` (keyed and unkeyed), and load the dashboard and /docs with every asset they
 * reference. Each step reports what it saw; none of them knows whether the stack is rehearsed or real.
 */
import { spawnEsopt } from '../../assembly/esopt-process.ts';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { EnvironmentName, EvaluationView, RunConfig, RunDetail, type EvaluationRequestInput, type RunConfigInput } from '../../../shared/schemas/index.ts';


export interface StackAccess {
  apiUrl: string;
  token: string;
  log: (message: string) => void;
  /**
   * What the commands that write the stack's bucket directly (`esopt tasks push --cloud`, `esopt instructions
   * push --cloud`) are run with: ESOPT_BUCKET and the caller's AWS credentials and region (off AWS, the endpoint).
   */
  bucketEnv?: Record<string, string>;
}

/** The environments that need nothing but this repository (openenv and rollout name a server of the user's). */
export const BuiltInEnvironment = EnvironmentName.exclude(['openenv', 'rollout']);
export type BuiltInEnvironment = z.infer<typeof BuiltInEnvironment>;

/** A small, quick configuration of each environment: one iteration of two members on two tasks. */
export const ENVIRONMENT_OPTIONS: Record<BuiltInEnvironment, Record<string, unknown>> = {
  sudoku: { size: 4, blanks: 2 },
  tools: {},
  web: { backend: 'chromium', actionTimeoutMs: 5_000, episodeTimeoutMs: 60_000 },
  heuristic: { problems: ['bin-packing'], submissions: 1, instances: 2 },
};

export function oneIterationConfig(environment: BuiltInEnvironment, seed = 1): RunConfigInput {
  return {
    environment: { name: environment, options: ENVIRONMENT_OPTIONS[environment] },
    tasks: { seed, trainPerIteration: 2, evalCount: 1 },
    model: { preset: 'tiny', seed },
    es: { population: 2, sigma: 0.05, alpha: 0.05 },
    generation: { temperature: 1, topP: 1, topK: 0, maxTokens: 8 },
    iterations: 1,
    evalInterval: 1,
    deadlineMs: 180_000,
    // A deployed stack queues nothing without a spending limit (functions/http-api/cost-caps.ts).
    budget: { maxCostUsd: 1 },
    seed,
  };
}

interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * The esopt CLI as a user runs it: the Api URL by flag, the token in the environment, never on the command line.
 * `to: 'bucket'` runs a command that writes the stack's bucket itself (`--cloud`), with `access.bucketEnv` and no API token.
 */
function cli(args: string[], access: StackAccess, extraEnv: Record<string, string> = {}, to: 'api' | 'bucket' = 'api'): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('ESOPT_') && !k.startsWith('AWS_')));
    if (to === 'bucket' && !access.bucketEnv) throw new Error(`esopt ${args.slice(0, 2).join(' ')} --cloud needs the stack's bucket: give StackAccess.bucketEnv (ESOPT_BUCKET and AWS credentials)`);
    const child =
      to === 'api'
        ? spawnEsopt([...args, '--api', access.apiUrl, '--json'], { env: { ...env, ...extraEnv, ESOPT_TOKEN: access.token }, stdio: ['ignore', 'pipe', 'pipe'] })
        : spawnEsopt([...args, '--cloud', '--json'], { env: { ...env, ...extraEnv, ...access.bucketEnv }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

async function apiGet<S extends z.ZodType>(access: StackAccess, path: string, schema: S): Promise<z.infer<S>> {
  const res = await fetch(`${access.apiUrl}${path}`, { headers: { authorization: `Bearer ${access.token}` } });
  const text = await res.text();
  if (!res.ok) throw new Error(`GET ${path} → HTTP ${res.status}: ${text.slice(0, 300)}`);
  return schema.parse(JSON.parse(text));
}

const Created = z.object({ id: z.string() });
const Pushed = z.object({ name: z.string(), manifestSha256: z.string() }).passthrough();

/** `esopt tasks push FILE.jsonl --name N --environment E --cloud`: a task suite of the user's, one task a line. */
export async function pushTaskSuite(access: StackAccess, name: string, environment: EnvironmentName, tasks: readonly unknown[]): Promise<z.infer<typeof Pushed>> {
  const jsonl = tasks.map((t) => JSON.stringify(t)).join('\n') + '\n';
  const result = await withTempFile(`${name}.jsonl`, jsonl, (path) => cli(['tasks', 'push', path, '--name', name, '--environment', environment], access, {}, 'bucket'));
  if (result.code !== 0) throw new Error(`esopt tasks push (${name}) exited ${result.code}: ${result.stderr.trim() || result.stdout.trim()}`);
  return Pushed.parse(JSON.parse(result.stdout));
}

/** `esopt instructions push --name N [--system SYSTEM.md] SKILL.md … --cloud`: instructions (c_t), a skill named by its file. */
export async function pushInstructions(access: StackAccess, name: string, documents: { system?: string; skills: ReadonlyArray<{ name: string; text: string }> }): Promise<z.infer<typeof Pushed>> {
  const dir = mkdtempSync(join(tmpdir(), 'esopt-rehearsal-'));
  try {
    const args = ['instructions', 'push', '--name', name];
    if (documents.system !== undefined) {
      writeFileSync(join(dir, 'system.md'), documents.system);
      args.push('--system', join(dir, 'system.md'));
    }
    for (const skill of documents.skills) {
      writeFileSync(join(dir, `${skill.name}.md`), skill.text);
      args.push(join(dir, `${skill.name}.md`));
    }
    const result = await cli(args, access, {}, 'bucket');
    if (result.code !== 0) throw new Error(`esopt instructions push (${name}) exited ${result.code}: ${result.stderr.trim() || result.stdout.trim()}`);
    return Pushed.parse(JSON.parse(result.stdout));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function withTempFile<T>(name: string, content: string, work: (path: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'esopt-rehearsal-'));
  const path = join(dir, name);
  writeFileSync(path, content);
  return work(path).finally(() => rmSync(dir, { recursive: true, force: true }));
}

export interface TrainingReport {
  environment: EnvironmentName;
  run: string;
  state: string;
  error: string | null;
  completed_iterations: number;
  /** Of the last iteration: episodes expected and counted, those that failed or never reported, tokens the model generated. */
  expected: number | null;
  counted: number | null;
  failed: number | null;
  missing: number | null;
  completion_tokens: number | null;
  /** The most common error of the iteration's failed episodes. */
  top_error: string | null;
  seconds: number;
}

/**
 * `esopt runs start` with a one-iteration config, then the run followed through the API until it ends or `timeoutMs`
 * passes. A built-in environment gets its quick options; an environment that reaches outside (openenv, rollout) comes
 * with its own, naming the server the caller started, and `overrides` change the rest of the config (a task suite).
 */
export async function trainOneIteration(
  access: StackAccess,
  which: BuiltInEnvironment | { name: EnvironmentName; options: Record<string, unknown> },
  timeoutMs = 300_000,
  overrides: Partial<RunConfigInput> = {},
  /** The environment server's key, passed as a user does: `--environment-key-env` naming a variable of the shell. */
  environmentKey?: string,
): Promise<TrainingReport> {
  const started = performance.now();
  const environment = typeof which === 'string' ? which : which.name;
  const config = RunConfig.parse({ ...oneIterationConfig(typeof which === 'string' ? which : 'sudoku'), ...(typeof which === 'string' ? {} : { environment: which }), ...overrides });
  const keyArgs = environmentKey === undefined ? [] : ['--environment-key-env', 'REHEARSAL_ENVIRONMENT_KEY'];
  const keyEnv: Record<string, string> = environmentKey === undefined ? {} : { REHEARSAL_ENVIRONMENT_KEY: environmentKey };
  const result = await withTempFile('config.json', JSON.stringify(config), (path) => cli(['runs', 'start', '--config', path, ...keyArgs], access, keyEnv));
  if (result.code !== 0) throw new Error(`esopt runs start (${environment}) exited ${result.code}: ${result.stderr.trim() || result.stdout.trim()}`);
  const { id } = Created.parse(JSON.parse(result.stdout));
  access.log(`${environment}: run ${id} started; following it …`);
  const deadline = Date.now() + timeoutMs;
  let detail = await apiGet(access, `/runs/${id}`, RunDetail);
  while (!['finished', 'failed', 'stopped'].includes(detail.state) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 1000));
    detail = await apiGet(access, `/runs/${id}`, RunDetail);
  }
  return {
    environment,
    run: id,
    state: detail.state,
    error: detail.status?.error ?? (Date.now() >= deadline && detail.state !== 'finished' ? `still ${detail.state} after ${timeoutMs} ms` : null),
    completed_iterations: detail.completedIterations,
    expected: detail.latest?.expected ?? null,
    counted: detail.latest?.counted ?? null,
    failed: detail.latest?.failed ?? null,
    missing: detail.latest?.missing ?? null,
    completion_tokens: detail.latest?.tokens.completion ?? null,
    top_error: detail.latest?.topError?.message ?? null,
    seconds: (performance.now() - started) / 1000,
  };
}

export interface EvaluationReport {
  environment: EnvironmentName;
  keyed: boolean;
  evaluation: string;
  state: string;
  error: string | null;
  episodes: number;
  failed: number;
  first_error: string | null;
  seconds: number;
}

/** `esopt evals start --wait` of an OpenAI-compatible endpoint, its key (when given) from the environment as a user passes it. */
export async function evaluateEndpoint(
  access: StackAccess,
  environment: BuiltInEnvironment,
  endpoint: { baseUrl: string; model: string; apiKey?: string },
  episodes = 2,
): Promise<EvaluationReport> {
  const started = performance.now();
  const request: EvaluationRequestInput = {
    model: { kind: 'external', baseUrl: endpoint.baseUrl, model: endpoint.model },
    environment: { name: environment, options: ENVIRONMENT_OPTIONS[environment] },
    tasks: { split: 'eval', count: episodes, seed: 3 },
    episodes,
    concurrency: episodes,
    generation: { temperature: 0, topP: 1, topK: 0, maxTokens: 8 },
    timeoutMs: 120_000,
    budget: { maxCostUsd: 1 },
  };
  const keyEnv: Record<string, string> = endpoint.apiKey ? { ESOPT_REHEARSAL_ENDPOINT_KEY: endpoint.apiKey } : {};
  const args = ['evals', 'start', '--request', JSON.stringify(request), '--wait', ...(endpoint.apiKey ? ['--api-key-env', 'ESOPT_REHEARSAL_ENDPOINT_KEY'] : [])];
  const result = await cli(args, access, keyEnv);
  if (result.code !== 0 && !result.stdout.trim()) throw new Error(`esopt evals start (${environment}) exited ${result.code}: ${result.stderr.trim()}`);
  const view = EvaluationView.parse(JSON.parse(result.stdout));
  const failures = view.episodes.filter((e) => e.error !== null);
  return {
    environment,
    keyed: endpoint.apiKey !== undefined,
    evaluation: view.id,
    state: view.status.state,
    error: view.status.error,
    episodes: view.episodes.length,
    failed: failures.length,
    first_error: failures[0]?.error ?? null,
    seconds: (performance.now() - started) / 1000,
  };
}

/** `esopt tasks push DIR --name N --cloud`: a MiniWoB++-layout folder of task pages, pushed by content. */
export async function pushTaskFolder(access: StackAccess, name: string, dir: string): Promise<z.infer<typeof Pushed>> {
  const result = await cli(['tasks', 'push', dir, '--name', name], access, {}, 'bucket');
  if (result.code !== 0) throw new Error(`esopt tasks push ${dir} (${name}) exited ${result.code}: ${result.stderr.trim() || result.stdout.trim()}`);
  return Pushed.parse(JSON.parse(result.stdout));
}

/**
 * `esopt evals start --request … --wait` of a whole request a user wrote (an agent endpoint of theirs on a web app or a
 * task folder), the environment's key (an app's) passed as a user does, with `--environment-key-env`; the view it ends with.
 */
export async function evaluate(access: StackAccess, request: EvaluationRequestInput, environmentKey?: string): Promise<EvaluationView> {
  const keyArgs = environmentKey === undefined ? [] : ['--environment-key-env', 'REHEARSAL_ENVIRONMENT_KEY'];
  const keyEnv: Record<string, string> = environmentKey === undefined ? {} : { REHEARSAL_ENVIRONMENT_KEY: environmentKey };
  const result = await cli(['evals', 'start', '--request', JSON.stringify(request), '--wait', ...keyArgs], access, keyEnv);
  if (result.code !== 0 && !result.stdout.trim()) throw new Error(`esopt evals start (${request.environment.name}) exited ${result.code}: ${result.stderr.trim()}`);
  return EvaluationView.parse(JSON.parse(result.stdout));
}

/** GET a path of the Api with the user's token: the JSON, or the bytes and type of anything else (a replay's frame). */
export async function apiFetch(access: StackAccess, path: string): Promise<{ status: number; type: string; json?: unknown; bytes: Uint8Array }> {
  const res = await fetch(`${access.apiUrl}${path}`, { headers: { authorization: `Bearer ${access.token}` } });
  const bytes = new Uint8Array(await res.arrayBuffer());
  const type = res.headers.get('content-type') ?? '';
  return { status: res.status, type, bytes, ...(type.includes('json') ? { json: JSON.parse(new TextDecoder().decode(bytes)) } : {}) };
}

export interface PageReport {
  path: string;
  status: number;
  bytes: number;
  contentType: string;
}

/** Local paths a page references: its src and href attributes, and an inline script's `url: '…'` (Swagger's spec). */
export function referencedPaths(html: string): string[] {
  const found = [...html.matchAll(/\b(?:src|href)="(\/[^"]*)"/g), ...html.matchAll(/\burl:\s*'(\/[^']*)'/g)].map((m) => m[1]!);
  return [...new Set(found)];
}

/** The dashboard and the API docs, each page and every asset it references, fetched as a browser would (no token). */
export async function loadPages(access: Pick<StackAccess, 'apiUrl'>): Promise<PageReport[]> {
  const reports: PageReport[] = [];
  const seen = new Set<string>();
  const visit = async (path: string) => {
    if (seen.has(path)) return;
    seen.add(path);
    const res = await fetch(`${access.apiUrl}${path}`);
    const body = Buffer.from(await res.arrayBuffer());
    const contentType = res.headers.get('content-type') ?? '';
    reports.push({ path, status: res.status, bytes: body.length, contentType });
    if (res.ok && contentType.startsWith('text/html')) for (const ref of referencedPaths(body.toString('utf8'))) await visit(ref);
  };
  for (const page of ['/', '/docs']) await visit(page);
  return reports;
}
