/**
 * `esopt train --cloud` end to end on loopback: s3rver stands in for the runs bucket and the dev
 * Lambda-invoke endpoint (running the real Episode handler in this process) for the Episode function,
 * both reached only through the SDK endpoint overrides in the trainer's environment, exactly as a
 * deployed stack would be. The trainer child process serves a tiny model at --public-url; the handler
 * plays every episode against it with the bearer token, writes its reward to the bucket, and the
 * trainer folds the rewards in from there. Records, checkpoint, log and report must all be in the bucket.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalCloud, type LocalCloud } from '../../trainer/dev/local-cloud/local-cloud.ts';
import { keys } from '../../shared/keys.ts';
import { CheckpointMeta, IterationManifest, LogEntry, RewardRecord, UpdateRecord } from '../../shared/schemas/index.ts';
import { cloudSite, cloudStackFromEnv } from '../../trainer/assembly/cloud-stack.ts';
import { TrainingReport } from '../../trainer/training/loop/report.ts';
import { esopt, freePort } from './helpers/esopt-process.ts';
import { localStackEnv } from './helpers/local-stack-env.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-train-cloud-'));
const configPath = join(root, 'config.json');
const TOKEN = 'train-cloud-test-token';
const RUN = 'cloud-run';
const POPULATION = 4;
const ITERATIONS = 2;

writeFileSync(
  configPath,
  JSON.stringify({
    environment: { name: 'sudoku', options: { size: 4, blanks: 2, invalidMove: 'waste', slack: 0 } },
    tasks: { seed: 5, trainPerIteration: 1, evalCount: 1 },
    model: { preset: 'tiny', seed: 1 },
    es: { population: POPULATION, sigma: 0.05, alpha: 0.05 },
    generation: { temperature: 1, topP: 1, topK: 0, maxTokens: 6 },
    iterations: ITERATIONS,
    evalInterval: 2,
    checkpointInterval: 1,
    deadlineMs: 60_000,
    seed: 3,
  }),
);

let cloud: LocalCloud;
let port: number;
let publicUrl: string;
let cloudEnv: Record<string, string>;

beforeAll(async () => {
  port = await freePort();
  // https as the stack's trainerUrl is: the command serves TLS and publishes the certificate the handler pins.
  publicUrl = `https://127.0.0.1:${port}`;
  // The Episode function's environment as the stack sets it: the trainer's URL and the token.
  cloud = await startLocalCloud({ prices: measuredPrices(), env: { ESOPT_TRAINER_URL: `${publicUrl}/v1`, ESOPT_TRAINER_TOKEN: TOKEN } });
  cloudEnv = { ...localStackEnv(cloud), ESOPT_TOKEN: TOKEN };
});

afterAll(async () => {
  await cloud?.close();
  rmSync(root, { recursive: true, force: true });
});

async function json<T>(key: string, schema: { parse(v: unknown): T }): Promise<T> {
  const body = await cloud.store.get(key);
  expect(body, key).not.toBeNull();
  return schema.parse(JSON.parse(new TextDecoder().decode(body!)));
}

describe('the cloud site', () => {
  it('takes the SDK endpoint overrides (path-style for an S3-compatible server) and the public URL with or without /v1', async () => {
    const stack = cloudStackFromEnv({ ESOPT_BUCKET: 'esopt-dev-runs', ESOPT_EPISODE_FUNCTION: 'Episode', AWS_ENDPOINT_URL_S3: 'http://127.0.0.1:4569', AWS_ENDPOINT_URL_LAMBDA: 'http://127.0.0.1:9001', ESOPT_TOKEN: 'x' });
    expect(stack).toMatchObject({ s3Endpoint: 'http://127.0.0.1:4569', lambdaEndpoint: 'http://127.0.0.1:9001', region: 'us-east-1' });
    for (const url of ['http://10.0.0.5:8080', 'http://10.0.0.5:8080/', 'http://10.0.0.5:8080/v1']) {
      const t = cloudSite(stack, url);
      expect(t.policyEndpoint).toEqual({ baseUrl: 'http://10.0.0.5:8080/v1', tokenEnv: 'ESOPT_TRAINER_TOKEN' });
      expect(t.locate('runs/r/report.json')).toBe('s3://esopt-dev-runs/runs/r/report.json');
      await t.close();
    }
    expect(() => cloudStackFromEnv({ ESOPT_EPISODE_FUNCTION: 'Episode', AWS_ENDPOINT_URL_S3: 'not a url' })).toThrow(/ESOPT_BUCKET is not set.*AWS_ENDPOINT_URL_S3/);
  });
});

describe('esopt train --cloud', () => {
  it('trains 2 iterations through the Lambda endpoint and the bucket, the handler playing against --public-url', async () => {
    // The stack's trainerUrl output, /v1 included, is what --public-url takes.
    const exit = await esopt(['train', '--cloud', '--config', configPath, '--run', RUN, '--public-url', `${publicUrl}/v1`, '--host', '127.0.0.1', '--port', String(port), '--json'], cloudEnv);
    expect(exit.code, exit.stderr).toBe(0);
    const report = TrainingReport.parse(JSON.parse(exit.stdout));
    expect(report.iterations).toBe(ITERATIONS);
    expect(report.files).toEqual({ report: `s3://${cloud.s3.bucket}/${keys.report(RUN)}`, curve: `s3://${cloud.s3.bucket}/${keys.curve(RUN)}` });

    let lastHash = '';
    for (let k = 0; k < ITERATIONS; k++) {
      const manifest = await json(keys.manifest(RUN, k), IterationManifest);
      const rewardKeys = await cloud.store.list(keys.rewards(RUN, k));
      const records = await Promise.all(rewardKeys.map((key) => json(key, RewardRecord)));
      const training = records.filter((r) => r.member !== 'base');
      expect(training.length).toBe(POPULATION * manifest.tasks.length);
      for (const r of training) {
        // Played by the model over HTTP with the bearer token: any refusal or unreachable server would be an error here.
        expect(r.error, JSON.stringify(r)).toBeNull();
        expect(r.tokens.completion).toBeGreaterThan(0);
      }
      const update = await json(keys.update(RUN, k), UpdateRecord);
      // The update folded in exactly the rewards the handler wrote to the bucket (one task: a member's reward is its record's).
      expect(update.counted.length).toBe(POPULATION);
      if (k > 0) expect(update.thetaHashBefore).toBe(lastHash);
      lastHash = update.thetaHashAfter;
      const byMember = new Map(training.map((r) => [r.member, r.reward]));
      for (const m of update.memberRewards) expect(m.reward).toBe(byMember.get(m.member));
      await json(keys.checkpointMeta(RUN, k + 1), CheckpointMeta);
    }
    const log = new TextDecoder().decode((await cloud.store.get(keys.log(RUN)))!).trim().split('\n').map((line) => LogEntry.parse(JSON.parse(line)));
    expect(log.length).toBeGreaterThanOrEqual(ITERATIONS);
    expect(report.thetaHash).toBe(lastHash);
    const stored = await json(keys.report(RUN), TrainingReport);
    expect(stored.thetaHash).toBe(report.thetaHash);
    expect(cloud.tally.written).toBeGreaterThanOrEqual(POPULATION * ITERATIONS);
    expect(cloud.invoke.stats.deliveries).toBeGreaterThanOrEqual(POPULATION * ITERATIONS);
  }, 60_000);

  it('resumes a run from the bucket, reading its config there', async () => {
    const exit = await esopt(['train', '--cloud', '--resume', RUN, '--public-url', publicUrl, '--port', String(port), '--json'], cloudEnv);
    expect(exit.code, exit.stderr).toBe(0);
    const report = TrainingReport.parse(JSON.parse(exit.stdout));
    expect(report.iterations).toBe(ITERATIONS);
    expect(report.thetaHash).toBe((await json(keys.report(RUN), TrainingReport)).thetaHash);
  }, 30_000);

  it('names what is missing: a variable, the token, the public URL', async () => {
    const { ESOPT_EPISODE_FUNCTION: _, ...noFunction } = cloudEnv;
    const a = await esopt(['train', '--cloud', '--config', configPath, '--public-url', publicUrl], noFunction);
    expect(a.code).toBe(2);
    expect(a.stderr).toMatch(/ESOPT_EPISODE_FUNCTION is not set/);
    const { ESOPT_TOKEN: __, ...noToken } = cloudEnv;
    const b = await esopt(['train', '--cloud', '--config', configPath, '--public-url', publicUrl], noToken);
    expect(b.code).toBe(2);
    expect(b.stderr).toMatch(/ESOPT_TOKEN is not set/);
    const c = await esopt(['train', '--cloud', '--config', configPath], cloudEnv);
    expect(c.code).toBe(2);
    expect(c.stderr).toMatch(/--public-url is required/);
  }, 30_000);
});
