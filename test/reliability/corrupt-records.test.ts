/**
 * Corrupt inputs under an iteration's rewards prefix, in both stores (the fs store and the S3 adapter
 * against s3rver): malformed and truncated JSON, a record whose body names another iteration or member
 * than its key, members and tasks the manifest does not have, NaN and ±Infinity rewards (JSON writes NaN
 * as null, and 1e999 parses to Infinity), and an oversized record carrying its transcript inline. Each is
 * rejected and reported (invalidRecords), none is folded in: the update is exactly the update of the
 * valid records alone, written to a clean prefix.
 */
import { esAt } from '../../shared/schedule.ts';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalS3, type LocalS3 } from '../../trainer/dev/local-cloud/s3-server.ts';
import { ask, tell } from '../../shared/es.ts';
import { keys } from '../../shared/keys.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { IterationManifest, RunConfig, type RewardRecord } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { MAX_RECORD_BYTES, RewardCollector } from '../../trainer/training/loop/reward-collector.ts';
import { S3ObjectStore } from '../../shared/store/s3.ts';
import { classifyRecords } from '../../trainer/training/loop/classify-records.ts';

const config = RunConfig.parse({
  environment: { name: 'sudoku', options: { size: 4 } },
  tasks: { seed: 1, trainPerIteration: 2, evalCount: 1 },
  model: { preset: 'tiny', seed: 1 },
  es: { population: 4, sigma: 0.05, alpha: 0.05 },
  iterations: 1,
  seed: 9,
});
const TASKS = ['task-a', 'task-b'];

function manifest(run: string): IterationManifest {
  return IterationManifest.parse({
    run,
    iteration: 0,
    runSeed: config.seed,
    thetaHash: '0123456789abcdef',
    sigma: config.es.sigma,
    mode: 'full',
    rank: 1,
    members: ask(config.es),
    tasks: TASKS.map((id) => ({ id, task: {} })),
    episodesPerMember: TASKS.length,
    quorum: 1,
    deadline: new Date(Date.now() + 60_000).toISOString(),
    createdAt: new Date().toISOString(),
  });
}

function record(run: string, member: number, task: string, reward: number, extra: Partial<RewardRecord> = {}): RewardRecord {
  return {
    run,
    iteration: 0,
    member,
    task,
    reward,
    steps: 2,
    tokens: { prompt: 1, completion: 1 },
    durations: { episodeMs: 1, inferenceMs: 0 },
    cost: { usd: 0, lambdaGbSeconds: 0, gpuSeconds: 0 },
    error: null,
    transcriptKey: null,
    writtenAt: new Date().toISOString(),
    ...extra,
  };
}

/** The valid records: every member on task-a, members 0 and 1 on task-b (the corrupt ones take the other slots). */
const validPairs: Array<[number, string, number]> = [
  [0, 'task-a', 0.25],
  [1, 'task-a', 0.5],
  [2, 'task-a', 0.75],
  [3, 'task-a', 1],
  [0, 'task-b', 0.125],
  [1, 'task-b', 0.375],
];

/** Corrupt objects, each under a key of iteration 0's rewards prefix: key → body. */
function corrupt(run: string): Array<{ key: string; body: string; why: RegExp }> {
  const full = JSON.stringify(record(run, 2, 'task-b', 0.9));
  return [
    { key: keys.reward(run, 0, 2, 'task-b'), body: full.slice(0, full.length / 2), why: /unreadable record/ },
    { key: keys.reward(run, 0, 10, 'task-b'), body: '{"not json', why: /unreadable record/ },
    // NaN: what JSON.stringify makes of it (null), and a literal that JSON.parse reads as Infinity.
    { key: keys.reward(run, 0, 4, 'task-a'), body: JSON.stringify(record(run, 4, 'task-a', Number.NaN)), why: /unreadable record/ },
    { key: keys.reward(run, 0, 5, 'task-a'), body: JSON.stringify(record(run, 5, 'task-a', 0)).replace('"reward":0', '"reward":1e999'), why: /unreadable record/ },
    { key: keys.reward(run, 0, 6, 'task-a'), body: JSON.stringify(record(run, 6, 'task-a', 0)).replace('"reward":0', '"reward":-1e999'), why: /unreadable record/ },
    // A body that names iteration 3 (or member 1) under iteration 0's key for member 7.
    { key: keys.reward(run, 0, 7, 'task-a'), body: JSON.stringify({ ...record(run, 7, 'task-a', 1), iteration: 3 }), why: /names another/ },
    { key: keys.reward(run, 0, 7, 'task-b'), body: JSON.stringify(record(run, 1, 'task-b', 1)), why: /names another/ },
    // Well-formed, but for a member (9) and a task the manifest does not have.
    { key: keys.reward(run, 0, 9, 'task-a'), body: JSON.stringify(record(run, 9, 'task-a', 1)), why: /member 9 is not in the manifest/ },
    { key: keys.reward(run, 0, 0, 'task-z'), body: JSON.stringify(record(run, 0, 'task-z', 1)), why: /task task-z is not in the manifest/ },
    // An oversized record of a real member (it would count otherwise): its transcript inlined instead of stored apart.
    {
      key: keys.reward(run, 0, 3, 'task-b'),
      body: JSON.stringify({ ...record(run, 3, 'task-b', 1), transcript: 'x'.repeat(MAX_RECORD_BYTES) }),
      why: /oversized record/,
    },
    // Not a reward key at all, under the prefix.
    { key: `${keys.rewards(run, 0)}stray.json`, body: '{}', why: /not a reward key/ },
  ];
}

async function classified(store: ObjectStore, run: string) {
  const m = manifest(run);
  const c = classifyRecords(m, await new RewardCollector(store, run, 0).poll(), config.failedEpisodeReward);
  return { c, told: tell(m.members, c.rewards, { alpha: esAt(config.es, 0, config.iterations).alpha, shaping: config.es.shaping }) };
}

async function writeValid(store: ObjectStore, run: string) {
  for (const [member, task, reward] of validPairs) await store.put(keys.reward(run, 0, member, task), JSON.stringify(record(run, member, task, reward)), { ifAbsent: true });
}

let s3: LocalS3;
const root = mkdtempSync(join(tmpdir(), 'esopt-corrupt-'));
beforeAll(async () => {
  s3 = await startLocalS3('esopt-corrupt');
});
afterAll(async () => {
  await s3?.close();
  rmSync(root, { recursive: true, force: true });
});

const stores: Array<[string, () => ObjectStore]> = [
  ['fs store', () => new FsObjectStore(root)],
  ['S3 adapter on s3rver', () => new S3ObjectStore(s3.storeConfig)],
];

describe.each(stores)('corrupt reward records (%s)', (_name, open) => {
  it('are each rejected with a reason and never folded in: the update is that of the valid records alone', async () => {
    const store = open();
    await writeValid(store, 'clean');
    await writeValid(store, 'dirty');
    const injected = corrupt('dirty');
    for (const { key, body } of injected) await store.put(key, body, { ifAbsent: true });

    const reference = await classified(store, 'clean');
    const { c, told } = await classified(store, 'dirty');
    // Every corrupt object is reported once, with the reason that fits it.
    expect(c.invalid).toHaveLength(injected.length);
    for (const { key, why } of injected) {
      const reported = c.invalid.find((i) => i.key === key || key.endsWith(`/${i.key}.json`));
      expect(reported, key).toBeDefined();
      expect(reported!.reason, key).toMatch(why);
    }
    // Nothing lost, nothing extra: the counted set, the per-member means and the shaped rewards are the clean run's.
    expect(c.counted.map((r) => `${r.member}/${r.task}/${r.reward}`)).toEqual(reference.c.counted.map((r) => `${r.member}/${r.task}/${r.reward}`));
    expect(c.counted).toHaveLength(validPairs.length);
    expect(told).toEqual(reference.told);
    expect(told.memberRewards.every(Number.isFinite)).toBe(true);
    console.info(`[reliability] corrupt records (${_name}): ${injected.length} injected, ${c.invalid.length} rejected and reported, ${c.counted.length}/${validPairs.length} valid counted, 0 folded in`);
  });
});
