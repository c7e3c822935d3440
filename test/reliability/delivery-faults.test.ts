/**
 * At-least-once, failure-prone delivery through both stacks: the embedded one (fs store + the local
 * worker pool) and the cloud one (the S3 adapter on s3rver + the Lambda adapter on the local invoke
 * endpoint, Event invokes awaited through the store as `esopt train --cloud` does). Of 20 episodes,
 * 20% fail (their policy endpoint refuses them: the record carries the error) and 20% time out (their
 * endpoint holds them far beyond the fan-out's 1.5 s limit, so the outcome is decided, not a race: the
 * pool kills the worker, the record-awaiting fan-out gives up, and no record exists at the close). Every
 * episode is delivered three times: twice at once before the iteration closes, once after it (a late
 * arrival), and after the close the held episodes are let go, so their failure records also land late.
 * What the iteration folds in must equal a fault-free reference that played only the surviving
 * episodes with the same seeds: no reward lost, none counted twice, late records never counted.
 * Last, a local worker process is SIGKILLed while its episode waits on the policy: that episode is
 * reported failed with no record, every other one counts once, and the pool goes on.
 */
import { serve, type ServerType } from '@hono/node-server';
import { Hono } from 'hono';
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startInvokeEndpoint } from '../../trainer/dev/local-cloud/invoke-endpoint.ts';
import { startLocalS3, type LocalS3 } from '../../trainer/dev/local-cloud/s3-server.ts';
import { createEpisodeHandler } from '../../functions/episode.ts';
import { tell } from '../../shared/es.ts';
import { keys } from '../../shared/keys.ts';
import type { Fanout } from '../../shared/ports/fanout.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { IterationManifest, type EpisodeRequest } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { RewardCollector } from '../../trainer/training/loop/reward-collector.ts';
import { S3ObjectStore } from '../../shared/store/s3.ts';
import { LambdaFanout } from '../../trainer/fanout/lambda.ts';
import { LocalFanout } from '../../trainer/fanout/local.ts';
import { RecordAwaitingFanout } from '../../trainer/fanout/record-awaiting.ts';
import { classifyRecords } from '../../trainer/training/loop/classify-records.ts';
import { sudokuRequests } from '../cloud/helpers/sudoku-plan.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';

const MEMBERS = 4;
const TASKS = 5;
/** The fan-out's per-episode limit: where a timing-out episode is given up. */
const TIMEOUT_MS = 1500;
/** A timing-out episode's own deadline: far beyond the limit, so only the fan-out's limit can end it. */
const HANG_DEADLINE_MS = 10 * 60_000;
const root = mkdtempSync(join(tmpdir(), 'esopt-delivery-'));
let s3: LocalS3;
let refuse: { server: ServerType; url: string };
const closers: Array<() => Promise<unknown>> = [];

async function policyServer(answer: () => Response | Promise<Response>) {
  const app = new Hono();
  app.post('/v1/chat/completions', answer);
  const server: ServerType = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
  });
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1` };
}

async function closeServer(server: ServerType | undefined) {
  (server as unknown as Server | undefined)?.closeAllConnections();
  await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
}

/** A policy endpoint that holds every call until `release()`, then refuses them and every later call. */
async function holdingServer() {
  const held: Array<() => void> = [];
  let released = false;
  const refusal = () => new Response('{"error":"released after the close"}', { status: 400 });
  const p = await policyServer(() => (released ? refusal() : new Promise<Response>((resolve) => held.push(() => resolve(refusal())))));
  return {
    ...p,
    release() {
      released = true;
      held.splice(0).forEach((answer) => answer());
    },
  };
}

beforeAll(async () => {
  s3 = await startLocalS3('esopt-delivery');
  // A policy endpoint that refuses every call (a final 4xx: the episode fails and says why).
  refuse = await policyServer(() => new Response('{"error":"injected refusal"}', { status: 400 }));
});
afterAll(async () => {
  for (const close of closers.reverse()) await close();
  await closeServer(refuse?.server);
  await s3?.close();
  rmSync(root, { recursive: true, force: true });
});

type Fate = 'fail' | 'timeout' | 'ok';
/** Every fifth episode from the second on fails, every fifth from the fourth on times out: 20% each. */
const fate = (i: number): Fate => (i % 5 === 1 ? 'fail' : i % 5 === 3 ? 'timeout' : 'ok');

function withFaults(requests: EpisodeRequest[], hangUrl: string): EpisodeRequest[] {
  return requests.map((r, i) => {
    const f = fate(i);
    if (f === 'ok') return r;
    return { ...r, policy: { ...r.policy, baseUrl: f === 'fail' ? refuse.url : hangUrl }, ...(f === 'timeout' ? { deadline: new Date(Date.now() + HANG_DEADLINE_MS).toISOString() } : {}) };
  });
}

function manifestOf(run: string, requests: EpisodeRequest[]): IterationManifest {
  const tasks = [...new Map(requests.map((r) => [r.task.id, { id: r.task.id, task: r.task.value }])).values()];
  return IterationManifest.parse({
    run,
    iteration: 0,
    runSeed: 7,
    thetaHash: '0123456789abcdef',
    sigma: 0.05,
    mode: 'full',
    rank: 1,
    members: Array.from({ length: MEMBERS }, (_, index) => ({ index, noiseIndex: index >> 1, sign: index % 2 ? -1 : 1 })),
    tasks,
    episodesPerMember: tasks.length,
    quorum: 1,
    deadline: new Date(Date.now() + 60_000).toISOString(),
    createdAt: new Date().toISOString(),
  });
}

async function fold(store: ObjectStore, run: string, requests: EpisodeRequest[]) {
  const c = classifyRecords(manifestOf(run, requests), await new RewardCollector(store, run, 0).poll(), null);
  return { c, told: tell(manifestOf(run, requests).members, c.rewards, { alpha: 0.05, shaping: 'centered-rank' }) };
}

interface Stack {
  name: string;
  short: string;
  store: () => ObjectStore;
  /** `held`: the holding endpoint's URL, so the stack can tell a held episode's delivery from the others. */
  fanout: (held: string) => Promise<{ fanout: Fanout; settle: () => Promise<void>; stats?: () => object }>;
  /** What the fan-out says of an episode it gave up at TIMEOUT_MS. */
  timedOut: RegExp;
}

const quiet = { info() {}, error() {} };

const stacks: Stack[] = [
  {
    name: 'fs store + local worker pool',
    short: 'fs',
    store: () => new FsObjectStore(root),
    fanout: async () => {
      const fanout = new LocalFanout({ workers: 2, store: { kind: 'fs', root } });
      closers.push(() => fanout.close());
      await fanout.warm();
      // The pool answers a dispatch once its episodes have ended or been killed: nothing is left running.
      return { fanout, settle: async () => {} };
    },
    timedOut: /^timed out after 1500 ms: the worker was killed$/,
  },
  {
    name: 'S3 adapter on s3rver + Lambda adapter on the local invoke endpoint',
    short: 's3',
    store: () => new S3ObjectStore(s3.storeConfig),
    fanout: async (held) => {
      const store = new S3ObjectStore({ ...s3.storeConfig, maxSockets: 512 });
      // The faulty endpoints are on loopback: a stack reaches them only where its operator says so.
      const handle = createEpisodeHandler({ prices: measuredPrices(), store, env: { ESOPT_ENDPOINT_NETWORKS: 'loopback' }, memoryMb: 1024, billedPerInvocation: true, log: quiet });
      const tally = { written: 0, duplicates: 0, running: 0, runningHeld: 0 };
      const invoke = await startInvokeEndpoint({
        Episode: async (event) => {
          const isHeld = JSON.stringify(event).includes(held);
          tally.running++;
          if (isHeld) tally.runningHeld++;
          try {
            const response = await handle(event);
            if (response.ok) for (const o of response.outcomes) (o.written ? tally.written++ : o.duplicate ? tally.duplicates++ : 0);
            return response;
          } finally {
            tally.running--;
            if (isHeld) tally.runningHeld--;
          }
        },
      });
      const lambda = new LambdaFanout({ functionName: 'Episode', endpoint: invoke.url, credentials: { accessKeyId: 'dev', secretAccessKey: 'dev' }, backoffBaseMs: 5, backoffMaxMs: 50 });
      closers.push(async () => {
        await lambda.close();
        await invoke.close();
        store.destroy();
      });
      return {
        // What `esopt train --cloud` runs: Event invokes, each settled once its record is listed.
        fanout: new RecordAwaitingFanout(lambda, store, 50),
        // A Lambda run outlives its invoke: wait until only held episodes are still running (after the release: none).
        settle: async () => {
          while (tally.running > tally.runningHeld) await sleep(20);
        },
        stats: () => ({ ...invoke.stats, handlerWrites: tally.written, handlerSkippedDuplicates: tally.duplicates }),
      };
    },
    timedOut: /^accepted, but no record within 1500 ms$/,
  },
];

describe.each(stacks)('delivered three times, 20% failing, 20% timing out ($name)', (stack) => {
  it('folds in exactly the surviving episodes, once each, reports the rest, never counts a late record', async () => {
    const run = `faulty-${stack.short}`;
    const held = await holdingServer();
    closers.push(() => closeServer(held.server));
    const store = stack.store();
    const { fanout, settle, stats } = await stack.fanout(held.url);
    const clean = await sudokuRequests({ run, members: MEMBERS, tasks: TASKS, baseUrl: 'scripted:random' });
    const faulty = withFaults(clean, held.url);
    const options = { concurrency: 4, timeoutMs: TIMEOUT_MS };
    const pair = (r: EpisodeRequest) => `${r.member}/${r.task.id}`;
    const failing = clean.filter((_, i) => fate(i) === 'fail').map(pair);
    const timingOut = clean.filter((_, i) => fate(i) === 'timeout').map(pair);
    const timedOutKeys = clean.filter((_, i) => fate(i) === 'timeout').map((r) => keys.reward(run, 0, r.member, r.task.id));

    // Reference: only the surviving episodes, once, no faults, under another run id (seeds do not depend on it).
    const survivors = clean.filter((_, i) => fate(i) === 'ok').map((r) => ({ ...r, run: `${run}-ref` }));
    await fanout.dispatch(survivors, options);
    await settle();

    // Deliveries one and two, at once, before the iteration closes.
    const [first, second] = await Promise.all([fanout.dispatch(faulty, options), fanout.dispatch(faulty, options)]);
    await settle();
    const closed = await fold(store, run, clean);
    const bodiesAtClose = await Promise.all((await store.list(keys.rewards(run, 0))).map(async (k) => [k, new TextDecoder().decode((await store.get(k))!)]));
    // After the close: the held episodes are let go (their failure records land now, late), and
    // delivery three arrives, a late copy of every episode.
    held.release();
    await fanout.dispatch(faulty, options);
    await settle();

    const reference = await fold(store, `${run}-ref`, survivors);
    const pairs = (c: typeof closed.c) => c.counted.map((r) => `${r.member}/${r.task}/${r.reward}`);
    expect(pairs(closed.c), JSON.stringify({ invalid: closed.c.invalid, failures: closed.c.failures })).toEqual(pairs(reference.c));
    expect(closed.c.counted).toHaveLength(survivors.length);
    expect(closed.told).toEqual(reference.told);
    expect(closed.c.invalid).toEqual([]);
    expect(closed.c.duplicates).toBe(0);

    // Failures are reported as failures, with the refusal; nothing else failed.
    expect(closed.c.failures.map((f) => `${f.member}/${f.task}`).sort()).toEqual([...failing].sort());
    for (const f of closed.c.failures) expect(f.error).toMatch(/HTTP 400/);
    // Timeouts: no record at the close, and both deliveries' outcomes say the fan-out gave up on them.
    expect(bodiesAtClose.filter(([k]) => timedOutKeys.includes(k))).toEqual([]);
    for (const o of [...first, ...second].filter((o) => timingOut.includes(pair(o.request)))) {
      expect(o.error, pair(o.request)).toMatch(stack.timedOut);
      // What the training loop counts as the metrics row's `timedOut`.
      expect(o.timedOut, pair(o.request)).toBe(true);
    }
    expect([...first, ...second].filter((o) => !o.ok && !timingOut.includes(pair(o.request))).map((o) => pair(o.request))).toEqual([]);

    // The late deliveries changed nothing that was there: same keys, same bytes. What first landed after
    // the close is exactly the held episodes' failure records, and a fresh reader still counts the same.
    const bodiesAfter = await Promise.all((await store.list(keys.rewards(run, 0))).map(async (k) => [k, new TextDecoder().decode((await store.get(k))!)]));
    const late = bodiesAfter.filter(([k]) => !bodiesAtClose.some(([j]) => j === k));
    expect(bodiesAfter.filter(([k]) => bodiesAtClose.some(([j]) => j === k))).toEqual(bodiesAtClose);
    expect(late.map(([k]) => k).sort()).toEqual([...timedOutKeys].sort());
    const again = await fold(store, run, clean);
    expect(pairs(again.c)).toEqual(pairs(closed.c));
    expect(again.c.failures).toHaveLength(failing.length + timingOut.length);

    console.info(
      `[reliability] delivery (${stack.name}): ${MEMBERS * TASKS} episodes × 3 deliveries${stats ? ` (endpoint ${JSON.stringify(stats())})` : ''}; ` +
        `${closed.c.counted.length} counted = reference ${reference.c.counted.length}, ${closed.c.failures.length} reported failed, ${timingOut.length} timed out without a record, ${late.length} late records not counted; lost 0, twice 0`,
    );
  });
});

/**
 * The local worker process that owns the TCP connection coming from `port` (Linux /proc): the
 * worker running the episode that made the request.
 */
function childOwningPort(port: number): number | null {
  const hex = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  const inodes = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields[1]?.endsWith(hex)) inodes.add(fields[9]);
    }
  }
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')[1]) !== process.pid) continue;
      for (const fd of readdirSync(`/proc/${pid}/fd`)) {
        const socket = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (socket && inodes.has(socket[1])) return Number(pid);
      }
    } catch {
      // A process that ended while being looked at.
    }
  }
  return null;
}

describe('a local worker process SIGKILLed mid-episode', () => {
  it('reports that episode failed without a record, replaces the worker, counts every other episode once', async () => {
    const run = 'worker-killed';
    const fanout = new LocalFanout({ workers: 2, store: { kind: 'fs', root } });
    closers.push(() => fanout.close());
    await fanout.warm();
    const store = new FsObjectStore(root);
    const killed: number[] = [];
    // The victim's policy endpoint: on its first call, SIGKILL the worker process that made it, never answer.
    const killer = await policyServer(() => new Promise<Response>(() => {}));
    (killer.server as unknown as Server).on('request', (req) => {
      const pid = childOwningPort(req.socket.remotePort!);
      if (pid !== null) {
        killed.push(pid);
        process.kill(pid, 'SIGKILL');
      }
    });
    closers.push(() => closeServer(killer.server));
    const clean = await sudokuRequests({ run, members: MEMBERS, tasks: TASKS, baseUrl: 'scripted:random' });
    const VICTIM = 6;
    const requests = clean.map((r, i) => (i === VICTIM ? { ...r, policy: { ...r.policy, baseUrl: killer.url } } : r));
    const victim = `${clean[VICTIM].member}/${clean[VICTIM].task.id}`;

    const outcomes = await fanout.dispatch(requests, { concurrency: 2, timeoutMs: 60_000 });
    expect(killed).toHaveLength(1);
    const lost = outcomes.find((o) => `${o.request.member}/${o.request.task.id}` === victim)!;
    expect(lost).toMatchObject({ ok: false, error: 'worker exited (SIGKILL)' });
    expect(lost.timedOut).toBeUndefined();
    expect(outcomes.filter((o) => !o.ok)).toHaveLength(1);

    const survivors = clean.filter((_, i) => i !== VICTIM).map((r) => ({ ...r, run: `${run}-ref` }));
    await fanout.dispatch(survivors, { concurrency: 2, timeoutMs: 60_000 });
    const closed = await fold(store, run, clean);
    const reference = await fold(store, `${run}-ref`, survivors);
    expect(closed.c.counted.map((r) => `${r.member}/${r.task}/${r.reward}`)).toEqual(reference.c.counted.map((r) => `${r.member}/${r.task}/${r.reward}`));
    expect(closed.told).toEqual(reference.told);
    expect(closed.c).toMatchObject({ duplicates: 0, invalid: [], failures: [] });
    expect(await store.get(keys.reward(run, 0, clean[VICTIM].member, clean[VICTIM].task.id))).toBeNull();

    // The pool goes on without the dead worker (a fresh one is spawned on the next use): a re-dispatch of
    // the lost episode, with a sound policy, runs and lands its record; nothing else is written again.
    const before = await store.list(keys.rewards(run, 0));
    const [retry] = await fanout.dispatch([clean[VICTIM]], { concurrency: 2, timeoutMs: 60_000 });
    expect(retry).toMatchObject({ ok: true });
    const after = await store.list(keys.rewards(run, 0));
    expect(after.filter((k) => !before.includes(k))).toEqual([keys.reward(run, 0, clean[VICTIM].member, clean[VICTIM].task.id)]);
    console.info(`[reliability] worker killed: 1 of ${MEMBERS * TASKS} episodes' worker SIGKILLed mid-episode (pid ${killed[0]}); ${closed.c.counted.length} counted = reference ${reference.c.counted.length}, the lost episode reported (${lost.error}), re-dispatched on a replacement worker; lost 0 of the others, twice 0`);
  });
});
