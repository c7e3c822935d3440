/**
 * A whole rehearsal as a user would try a fresh deploy: every environment trained one iteration through
 * `esopt runs start`, every environment evaluated at an external endpoint with and without a key, the
 * dashboard and /docs with their assets; with the Episode function's peak memory and /tmp per environment,
 * measured by the rehearsed Lambda, for sizing the function.
 */
import { keys } from '../../../shared/keys.ts';
import { provenance, type Provenance } from '../../training/provenance.ts';
import { startExternalEndpoint } from './external-endpoint.ts';
import type { InvocationRecord } from './lambda-function.ts';
import { startRehearsal, type RehearsalOptions } from './rehearse.ts';
import { BuiltInEnvironment, evaluateEndpoint, loadPages, trainOneIteration, type EvaluationReport, type PageReport, type TrainingReport } from './scenarios.ts';

export interface FunctionSizing {
  function: string;
  environment: string;
  invocations: number;
  episodes_per_invocation: number;
  peak_memory_mb: number;
  peak_tmp_mb: number;
  max_duration_ms: number;
  configured: { memory_mb: number; ephemeral_storage_mb: number; timeout_s: number };
}

export interface RehearsalReport {
  ok: boolean;
  failures: string[];
  functions: Array<{ name: string; unzipped_mb: number; installed: string[]; build_ms: number; cached: boolean }>;
  /** Each box, and for a replica box the runs it announced itself under (it had caught up and served their members). */
  boxes: Array<{ id: string; url: string; followed_runs: number | null }>;
  trainings: TrainingReport[];
  evaluations: EvaluationReport[];
  external_calls: { keyed: { answered: number; unauthorized: number }; open: { answered: number; unauthorized: number } };
  pages: PageReport[];
  sizing: FunctionSizing[];
  replaced: Array<{ step: string; deployed: string; rehearsal: string }>;
  seconds: number;
  /** The commit, date and load it was made at. */
  made: Provenance;
}

/** The environment an Episode invocation played (its first request's), or `-` for an event that names none. */
function environmentOf(event: unknown): string {
  const e = event as { episodes?: Array<{ environment?: { name?: string } }>; environment?: { name?: string } };
  return e.episodes?.[0]?.environment?.name ?? e.environment?.name ?? '-';
}

export function sizing(records: InvocationRecord[], fn: string, configured: FunctionSizing['configured']): FunctionSizing[] {
  const by = new Map<string, InvocationRecord[]>();
  for (const r of records) by.set(environmentOf(r.event), [...(by.get(environmentOf(r.event)) ?? []), r]);
  return [...by.entries()].sort().map(([environment, rs]) => ({
    function: fn,
    environment,
    invocations: rs.length,
    episodes_per_invocation: Math.max(...rs.map((r) => (r.event as { episodes?: unknown[] }).episodes?.length ?? 1)),
    peak_memory_mb: Math.max(...rs.map((r) => r.peakMemoryMb)),
    peak_tmp_mb: Math.max(...rs.map((r) => r.tmpUsedMb)),
    max_duration_ms: Math.max(...rs.map((r) => r.durationMs)),
    configured,
  }));
}

export async function rehearse(o: RehearsalOptions & { environments?: BuiltInEnvironment[]; evaluations?: boolean }): Promise<RehearsalReport> {
  const started = performance.now();
  const log = o.log ?? (() => {});
  const environments = o.environments ?? BuiltInEnvironment.options;
  const stack = await startRehearsal(o);
  const keyed = await startExternalEndpoint({ apiKey: `sk-rehearsal-${stack.token.slice(0, 16)}` });
  const open = await startExternalEndpoint();
  const failures: string[] = [];
  try {
    const access = { apiUrl: stack.apiUrl, token: stack.token, log };
    log(`Api at ${stack.apiUrl}; loading the dashboard and /docs …`);
    const pages = await loadPages(access);
    for (const p of pages) if (p.status !== 200) failures.push(`GET ${p.path} answered ${p.status}`);
    const trainings: TrainingReport[] = [];
    const evaluations: EvaluationReport[] = [];
    for (const env of environments) {
      // Each environment's episodes in execution environments of their own, so its /tmp and memory are its own.
      await stack.functions.Episode!.lambda.recycle();
      const t = await trainOneIteration(access, env);
      trainings.push(t);
      log(`${env}: run ${t.state}, ${t.counted ?? 0}/${t.expected ?? 0} episodes counted, ${t.failed ?? 0} failed, ${t.completion_tokens ?? 0} tokens generated (${t.seconds.toFixed(0)} s)`);
      if (t.state !== 'finished' || t.failed !== 0 || t.counted !== t.expected || !t.completion_tokens) failures.push(`training ${env}: ${t.state}${t.error ? ` (${t.error})` : ''}, ${t.counted}/${t.expected} counted, ${t.failed} failed, ${t.completion_tokens} tokens`);
      if (o.evaluations === false) continue;
      for (const endpoint of [keyed, open]) {
        const e = await evaluateEndpoint(access, env, endpoint);
        evaluations.push(e);
        log(`${env}: ${e.keyed ? 'keyed' : 'unkeyed'} evaluation ${e.state}, ${e.episodes} episodes, ${e.failed} failed (${e.seconds.toFixed(0)} s)`);
        if (e.state !== 'finished' || e.failed !== 0 || e.episodes === 0) failures.push(`evaluation ${env} ${e.keyed ? 'keyed' : 'unkeyed'}: ${e.state}${e.error ? ` (${e.error})` : ''}, ${e.failed}/${e.episodes} failed${e.first_error ? `: ${e.first_error}` : ''}`);
      }
    }
    // A replica box announces itself under each run it follows once it has caught up; one that followed none served nothing.
    const followed = new Map<string, number>();
    for (const b of stack.boxes.filter((x) => x.id !== 'trainer')) {
      const runs = await Promise.all(trainings.map(async (t) => (await stack.store.get(keys.replica(t.run, b.id))) !== null));
      followed.set(b.id, runs.filter(Boolean).length);
      if (!runs.some(Boolean)) failures.push(`${b.id} followed none of the ${trainings.length} runs`);
    }
    if (keyed.calls.unauthorized > 0) failures.push(`the keyed endpoint refused ${keyed.calls.unauthorized} calls without its key`);
    const episode = stack.functions.Episode!;
    const api = stack.functions.Api!;
    const conf = (f: typeof episode) => ({ memory_mb: f.definition.memoryMb, ephemeral_storage_mb: f.definition.ephemeralStorageMb, timeout_s: f.definition.timeoutS });
    const sized = [...sizing(episode.lambda.invocations, 'Episode', conf(episode)), ...sizing(api.lambda.invocations, 'Api', conf(api))];
    for (const s of sized) {
      if (s.peak_memory_mb > s.configured.memory_mb) failures.push(`${s.function} (${s.environment}) peaked at ${s.peak_memory_mb} MB of ${s.configured.memory_mb} MB`);
    }
    return {
      ok: failures.length === 0,
      failures,
      functions: Object.entries(stack.functions).map(([name, f]) => ({ name, unzipped_mb: Math.round(f.build.bytes / 1e5) / 10, installed: f.build.installed, build_ms: Math.round(f.build.ms), cached: f.build.cached })),
      boxes: stack.boxes.map((b) => ({ id: b.id, url: `https://${b.host}:${b.port}/v1`, followed_runs: followed.get(b.id) ?? null })),
      trainings,
      evaluations,
      external_calls: { keyed: { ...keyed.calls }, open: { ...open.calls } },
      pages,
      sizing: sized,
      replaced: stack.replaced,
      seconds: (performance.now() - started) / 1000,
      made: provenance(),
    };
  } finally {
    await keyed.close();
    await open.close();
    await stack.close();
  }
}
