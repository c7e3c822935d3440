/**
 * TensorBoard event files: a real short embedded run writes one file under runs/<run>/tensorboard/, and a
 * reader that shares no code with the writer (helpers/tfevents-reader.ts: its own CRC-32C and protobuf
 * decoding) finds the file version first, then an event per metrics row (step = iteration, every tag at the
 * row's value as float32, the row's wall time) and one per evaluation (success rate and its Wilson
 * interval). A flipped byte fails a CRC. The file is rewritten whole (same key, growing) after each event.
 * A sink that throws is logged once and the run finishes.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EvaluationResult, MetricsRow, RunConfig, type RunConfigInput } from '../../shared/schemas/index.ts';
import { runEmbedded } from '../../trainer/assembly/run.ts';
import { silentProgress } from '../../trainer/training/loop/index.ts';
import { TensorBoardSink, type MetricsSink } from '../../trainer/training/metrics/index.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { readEvents, readFrames, type DecodedEvent } from './helpers/tfevents-reader.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-tensorboard-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const config: RunConfigInput = {
  environment: { name: 'sudoku', options: { size: 4, blanks: 4, shapedReward: true, invalidMove: 'waste' } },
  tasks: { seed: 3, trainPerIteration: 2, evalCount: 2 },
  model: { preset: 'tiny', seed: 1 },
  es: { population: 4, sigma: { schedule: 'linear', initial: 0.05, final: 0.02 }, alpha: 0.05 },
  iterations: 3,
  evalInterval: 2,
  checkpointInterval: 100,
  policy: 'scripted:random',
  localEpisodes: 'in-process',
  workers: 2,
  deadlineMs: 60_000,
  seed: 11,
};

/** What each row's tags must hold, written out here rather than taken from the writer's table. */
function expectedRowTags(r: MetricsRow): Record<string, number | null | undefined> {
  return {
    'reward/mean': r.meanReward,
    'reward/max': r.maxReward,
    'train/success_rate': r.successRate,
    'episodes/expected': r.expected,
    'episodes/counted': r.counted,
    'episodes/failed': r.failed,
    'episodes/invalid': r.invalid,
    'episodes/missing': r.missing,
    'episodes/timed_out': r.timedOut,
    'es/sigma': r.sigma,
    'es/alpha': r.alpha,
    'tokens/prompt': r.tokens.prompt,
    'tokens/completion': r.tokens.completion,
    'cost/usd': r.cost.usd,
    'cost/lambda_gb_seconds': r.cost.lambdaGbSeconds,
    'cost/gpu_seconds': r.cost.gpuSeconds,
    'time_ms/manifest': r.durations.manifest,
    'time_ms/episodes': r.durations.episodes,
    'time_ms/collect': r.durations.collect,
    'time_ms/update': r.durations.update,
    'time_ms/checkpoint': r.durations.checkpoint,
    'time_ms/total': r.durations.total,
    'spent/usd': r.spent?.usd,
    'spent/episodes': r.spent?.episodes,
    'spent/wall_ms': r.spent?.wallMs,
  };
}

function expectedEvaluationTags(e: EvaluationResult): Record<string, number> {
  return {
    'eval/success_rate': e.successRate,
    'eval/success_rate_lower': e.interval.low,
    'eval/success_rate_upper': e.interval.high,
    'eval/mean_reward': e.meanReward,
    'eval/tasks': e.tasks,
    'eval/successes': e.successes,
    'eval/failed': e.failed,
    'eval/duration_ms': e.durationMs,
  };
}

/** Every number in a row but its iteration (the step), its evaluation (its own event) and the top error's count. */
function numericLeaves(x: unknown, path = ''): string[] {
  if (typeof x === 'number') return [path];
  if (x === null || typeof x !== 'object') return [];
  return Object.entries(x).flatMap(([k, v]) => (['iteration', 'evaluation', 'topError'].includes(k) && !path ? [] : numericLeaves(v, path ? `${path}.${k}` : k)));
}

function tagsOf(e: DecodedEvent): Record<string, number | undefined> {
  return Object.fromEntries((e.values ?? []).map((v) => [v.tag, v.simpleValue]));
}

function asFloat32(tags: Record<string, number | null | undefined>): Record<string, number> {
  return Object.fromEntries(Object.entries(tags).flatMap(([k, v]) => (typeof v === 'number' ? [[k, Math.fround(v)]] : [])));
}

describe('TensorBoard event files', () => {
  const run = 'tb';
  const storeRoot = join(root, run);
  let file: Buffer;
  let fileName: string;
  const logged: string[] = [];
  const startedS = Math.floor(Date.now() / 1000);

  it('a real run writes its metrics as TensorBoard reads them: steps, tags and values as its rows', async () => {
    // A sink that fails on every call: logged once, and the run (and the other sinks) go on.
    const broken: MetricsSink = {
      name: 'broken',
      iteration: async () => {
        throw new Error('broken sink: no disk');
      },
      evaluation: async () => {
        throw new Error('broken sink: no disk');
      },
      close: async () => {
        throw new Error('broken sink: no disk');
      },
    };
    const { result } = await runEmbedded({
      config: RunConfig.parse(config),
      run,
      storeRoot,
      progress: silentProgress,
      metrics: { env: {}, log: (l) => logged.push(l), sinks: [broken] },
    });
    expect(result.rows.map((r) => r.iteration)).toEqual([0, 1, 2]);
    expect(result.evaluations.map((e) => e.iteration)).toEqual([0, 2, 3]);
    expect(logged.filter((l) => l.includes('broken'))).toHaveLength(1);
    expect(logged[0]).toMatch(/metrics: broken failed.*the run goes on.*no disk/);

    const dir = join(storeRoot, 'runs', run, 'tensorboard');
    const names = readdirSync(dir);
    expect(names).toHaveLength(1);
    fileName = names[0];
    const m = /^events\.out\.tfevents\.(\d+)\.([A-Za-z0-9._-]+)$/.exec(fileName);
    expect(m).not.toBeNull();
    expect(Number(m![1])).toBeGreaterThanOrEqual(startedS);
    expect(Number(m![1])).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000));
    file = readFileSync(join(dir, fileName));

    const rows = readdirSync(join(storeRoot, 'runs', run, 'metrics'))
      .sort()
      .map((f) => MetricsRow.parse(JSON.parse(readFileSync(join(storeRoot, 'runs', run, 'metrics', f), 'utf8'))));
    const evaluations = readdirSync(join(storeRoot, 'runs', run, 'evaluations'))
      .sort()
      .map((f) => EvaluationResult.parse(JSON.parse(readFileSync(join(storeRoot, 'runs', run, 'evaluations', f), 'utf8'))));
    expect(rows).toHaveLength(3);
    expect(evaluations.map((e) => e.iteration)).toEqual([0, 2, 3]);

    const events = readEvents(file);
    expect(events[0].fileVersion).toBe('brain.Event:2');
    expect(events[0].values).toBeUndefined();
    const summaries = events.slice(1);
    expect(summaries.every((e) => e.fileVersion === undefined && e.values && e.values.length > 0)).toBe(true);
    // steps never go back
    expect(summaries.map((e) => e.step)).toEqual([...summaries.map((e) => e.step)].sort((a, b) => a - b));

    const rowEvents = summaries.filter((e) => e.values!.some((v) => v.tag === 'reward/mean'));
    const evalEvents = summaries.filter((e) => e.values!.some((v) => v.tag === 'eval/success_rate'));
    expect(rowEvents.length + evalEvents.length).toBe(summaries.length);
    expect(rowEvents.map((e) => e.step)).toEqual(rows.map((r) => r.iteration));
    expect(evalEvents.map((e) => e.step)).toEqual(evaluations.map((e) => e.iteration));

    for (const [i, row] of rows.entries()) {
      const ev = rowEvents[i];
      // every number the row holds has a tag (the list is the schema's, not invented)
      expect(Object.keys(tagsOf(ev)).length).toBe(numericLeaves(row).length);
      expect(tagsOf(ev)).toEqual(asFloat32(expectedRowTags(row)));
      expect(ev.wallTime).toBe(Date.parse(row.finishedAt) / 1000);
      expect(row.sigma).toBeDefined();
    }
    // σ followed its schedule, so the tag is no constant
    expect(new Set(rowEvents.map((e) => tagsOf(e)['es/sigma'])).size).toBe(3);
    for (const [i, e] of evaluations.entries()) {
      const ev = evalEvents[i];
      expect(tagsOf(ev)).toEqual(asFloat32(expectedEvaluationTags(e)));
      expect(tagsOf(ev)['eval/success_rate_lower']).toBeLessThanOrEqual(tagsOf(ev)['eval/success_rate']!);
      expect(tagsOf(ev)['eval/success_rate_upper']).toBeGreaterThanOrEqual(tagsOf(ev)['eval/success_rate']!);
    }
  }, 120_000);

  it('a flipped byte fails the CRC: in a record\'s data and in its length', () => {
    expect(readFrames(file).length).toBeGreaterThan(3);
    // the second record's data (past the first record: 12 + n + 4 bytes)
    const firstLength = Number(file.readBigUInt64LE(0));
    const second = 12 + firstLength + 4;
    const data = Buffer.from(file);
    data[second + 12 + 3] ^= 0x01;
    expect(() => readFrames(data)).toThrow(/data CRC mismatch/);
    const length = Buffer.from(file);
    length[second] ^= 0x01;
    expect(() => readFrames(length)).toThrow(/length CRC mismatch/);
    const lastByte = Buffer.from(file);
    lastByte[lastByte.length - 1] ^= 0x80;
    expect(() => readFrames(lastByte)).toThrow(/CRC mismatch/);
  });

  it('rewrites one file whole after each event: same key, the file read back growing by one event', async () => {
    const puts: Array<{ key: string; body: Uint8Array }> = [];
    const store = { put: async (key: string, body: Uint8Array | string) => (puts.push({ key, body: Buffer.from(body) }), true) } as unknown as ObjectStore;
    const sink = new TensorBoardSink(store, 'r1', { now: () => 1_700_000_000_500, host: 'box one' });
    expect(sink.key).toBe('runs/r1/tensorboard/events.out.tfevents.1700000000.box_one');
    const rows = readdirSync(join(storeRoot, 'runs', run, 'metrics'))
      .sort()
      .map((f) => MetricsRow.parse(JSON.parse(readFileSync(join(storeRoot, 'runs', run, 'metrics', f), 'utf8'))));
    for (const row of rows) await sink.iteration(row);
    await sink.close();
    expect(puts.map((p) => p.key)).toEqual(rows.map(() => sink.key));
    expect(puts.map((p) => readEvents(p.body).length)).toEqual([2, 3, 4]);
    // each file is the one before it plus one record: nothing rewritten differently
    for (let i = 1; i < puts.length; i++) expect(Buffer.from(puts[i].body.subarray(0, puts[i - 1].body.length)).equals(Buffer.from(puts[i - 1].body))).toBe(true);
    expect(readEvents(puts[0].body)[0]).toEqual({ wallTime: 1_700_000_000.5, step: 0, fileVersion: 'brain.Event:2' });
  });
});
