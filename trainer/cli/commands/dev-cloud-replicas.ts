/**
 * `esopt dev cloud --replicas R`: the deployed replica path on this machine. s3rver is the bucket and the
 * dev invoke endpoint runs the Episode handler with the stack's environment (ESOPT_TRAINER_URL and
 * ESOPT_REPLICA_URLS, id=url); the coordinator trains a small sudoku run over TLS through the Lambda
 * adapter as the trainer box would (naming the run in trainer/active-run.json), and R − 1 replica boxes
 * (trainer/cloud/box/replica-box.ts), each on its own loopback port with its own certificate, follow it.
 * Every episode's server is pinned to the certificate its own box announced.
 */
import { randomBytes } from 'node:crypto';
import { startLocalCloud, EPISODE_FUNCTION } from '../../dev/local-cloud/local-cloud.ts';
import { keys } from '../../../shared/keys.ts';
import { IterationManifest, ReplicaAnnouncement, ReplicaReport, RewardRecord, RunConfig, type ActiveRun, type RunStatus } from '../../../shared/schemas/index.ts';
import { CloudStack } from '../../assembly/cloud-stack.ts';
import { cloudWiring } from '../../assembly/wirings.ts';
import { runEmbedded } from '../../assembly/run.ts';
import { silentProgress } from '../../training/loop/index.ts';
import { readJson, writeJson } from '../../../shared/store/json.ts';
import { ReplicaBox } from '../../cloud/box/replica-box.ts';
import { freeLoopbackPort } from '../../serving/free-port.ts';
import { createTlsIdentity } from '../../serving/tls-identity.ts';
import { measuredPrices } from '../../fanout/measured-prices.ts';

export interface DevCloudReplicasReport {
  replicas: number;
  run: string;
  episodes: number;
  failed: number;
  /** Per iteration, the boxes its manifest routed members to. */
  routed: string[][];
  /** Each box's address and the fingerprint the Episode handler pinned for it. */
  boxes: Array<{ id: string; url: string; sha256: string }>;
  theta: string;
  /** Each replica's report of θ after the last update. */
  replica_theta: Record<string, string | null>;
}

export async function devCloudReplicas(o: { replicas: number; seed: number; population: number; iterations: number; log: (m: string) => void }): Promise<DevCloudReplicasReport> {
  process.env.AWS_ACCESS_KEY_ID ??= 'S3RVER';
  process.env.AWS_SECRET_ACCESS_KEY ??= 'S3RVER';
  const token = randomBytes(24).toString('hex');
  const boxes = await Promise.all(
    Array.from({ length: o.replicas }, async (_, i) => {
      const port = await freeLoopbackPort();
      return { id: i === 0 ? 'coordinator' : `replica-${i}`, port, url: `https://127.0.0.1:${port}/v1`, identity: await createTlsIdentity(['127.0.0.1']) };
    }),
  );
  const [coordinator, ...replicaBoxes] = boxes;
  const replicaUrls = replicaBoxes.map((b) => `${b.id}=${b.url}`).join(',');
  const cloud = await startLocalCloud({ prices: measuredPrices(), env: { ...process.env, ESOPT_TRAINER_URL: coordinator.url, ESOPT_REPLICA_URLS: replicaUrls, ESOPT_TRAINER_TOKEN: token } });
  const followers = replicaBoxes.map(
    (b) => new ReplicaBox({ store: cloud.store, id: b.id, publicUrl: b.url, host: '127.0.0.1', port: b.port, token, tls: b.identity, pollMs: 50, followPollMs: 50, log: { info() {}, error: (f: object, m: string) => o.log(`${b.id}: ${m} ${JSON.stringify(f)}`) } }),
  );
  try {
    o.log(`s3rver at ${cloud.s3.endpoint}, invoke endpoint at ${cloud.invoke.url}; ${boxes.map((b) => `${b.id} at ${b.url}`).join(', ')} (TLS, each its own certificate)`);
    const run = `dev-cloud-replicas-${o.seed}`;
    const config = RunConfig.parse({
      environment: { name: 'sudoku', options: { size: 4, blanks: 2, shapedReward: true } },
      tasks: { seed: o.seed, trainPerIteration: 1, evalCount: 1 },
      model: { preset: 'tiny', seed: o.seed },
      es: { population: o.population, sigma: 0.05, alpha: 0.05 },
      generation: { temperature: 1, topP: 1, topK: 0, maxTokens: 8 },
      iterations: o.iterations,
      evalInterval: o.iterations,
      deadlineMs: 120_000,
      seed: o.seed,
    });
    // What the trainer box does when it claims a run: its status, then the pointer the replica boxes follow.
    const now = new Date().toISOString();
    const status: RunStatus = { run, state: 'running', requestedAt: now, startedAt: now, finishedAt: null, error: null, updatedAt: now };
    await writeJson(cloud.store, keys.config(run), config);
    await writeJson(cloud.store, keys.runStatus(run), status);
    await writeJson(cloud.store, keys.activeRun(), { run, startedAt: now } satisfies ActiveRun);
    for (const f of followers) f.start();
    o.log(`training ${o.iterations} iterations of ${o.population} members over ${o.replicas} boxes …`);
    // The wiring publishes the coordinator's certificate, which the Episode function pins.
    const { site } = await cloudWiring(CloudStack.parse({ bucket: cloud.s3.bucket, episodeFunction: EPISODE_FUNCTION, s3Endpoint: cloud.s3.endpoint, lambdaEndpoint: cloud.invoke.url }), coordinator.url, coordinator.identity).open(config);
    const { result } = await runEmbedded({
      config,
      run,
      site,
      token,
      server: { host: '127.0.0.1', port: coordinator.port, tls: coordinator.identity },
      progress: silentProgress,
      replicas: { syncTimeoutMs: 60_000, expected: o.replicas - 1 },
    });
    await writeJson(cloud.store, keys.runStatus(run), { ...status, state: 'finished', finishedAt: new Date().toISOString(), updatedAt: new Date().toISOString() } satisfies RunStatus);
    const routed: string[][] = [];
    for (let k = 0; k < o.iterations; k++) routed.push((await readJson(cloud.store, keys.manifest(run, k), IterationManifest))?.routing?.replicas.map((r) => r.id) ?? []);
    const rewardKeys = (await cloud.store.list(`${keys.run(run)}iterations/`)).filter((k) => k.includes('/rewards/'));
    const records = await Promise.all(rewardKeys.map(async (k) => (await readJson(cloud.store, k, RewardRecord))!));
    const replicaTheta: Record<string, string | null> = {};
    const pinned: Record<string, string> = { coordinator: coordinator.identity.sha256 };
    for (const b of replicaBoxes) {
      replicaTheta[b.id] = (await readJson(cloud.store, keys.replicaReport(run, o.iterations, b.id), ReplicaReport))?.thetaHash ?? null;
      pinned[b.id] = (await readJson(cloud.store, keys.replica(run, b.id), ReplicaAnnouncement))?.tls?.sha256 ?? '';
    }
    return {
      replicas: o.replicas,
      run,
      episodes: records.length,
      failed: records.filter((r) => r.error !== null).length,
      routed,
      boxes: boxes.map((b) => ({ id: b.id, url: b.url, sha256: pinned[b.id] })),
      theta: result.thetaHash,
      replica_theta: replicaTheta,
    };
  } finally {
    await Promise.all(followers.map((f) => f.close()));
    await cloud.close();
  }
}
