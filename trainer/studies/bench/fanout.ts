/**
 * `esopt bench fanout`: two measurements, side by side in one run.
 *
 *  scaling — episodes/s of a CPU-light environment (9×9 sudoku, scripted oracle) through the local
 *    pool with N worker processes, divided by N × the rate with one worker, for N = 1 … cores.
 *  overhead_ratio — 1,000 episodes of one iteration through the Lambda adapter and the dev invoke
 *    endpoint, whose injected latency (lognormal) stands for the episodes' own time. The trainer's own
 *    work is what lies outside the span in which episodes run: dispatching before the first one starts,
 *    collecting after the last one ends. overhead_ratio = (iteration − episode span) ÷ iteration.
 *    The simulated cloud runs in a child process, so `trainer_cpu_share` (this process's CPU time ÷ the
 *    iteration's wall time) is the trainer's work alone. Collection polls while the invokes go out,
 *    as the ES loop's does. `--per-invocation` sends several episodes per worker message or Lambda
 *    invoke in both measurements (the same for N = 1 and N = cores, so the ratio stays fair).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { EPISODE_FUNCTION } from '../../dev/local-cloud/local-cloud.ts';
import { loadEnvironment } from '../../../environments/index.ts';
import type { EpisodeRequest } from '../../../shared/schemas/index.ts';
import { collectRewards } from '../../training/loop/index.ts';
import { iterationRequests, requestedPairs } from '../../fanout/iteration-requests.ts';
import { MAX_EPISODES_PER_INVOCATION } from '../../../functions/episode-event.ts';
import { awaitingRecords, lambdaFanout, localPool } from '../../assembly/fanouts.ts';
import { bucketStore } from '../../assembly/stores.ts';
import type { Log } from './benchmark.ts';
import { spinRate } from './cpu-capacity.ts';
import { startCloudProcesses } from './fanout-cloud.ts';
import { machineInfo, median } from './measure.ts';
import { int } from './options.ts';

const SCALING_GOAL = 0.8;
/** How long each round's pure-compute control spins (cpu-capacity.ts). */
const CONTROL_MS = 250;
const OVERHEAD_GOAL = 0.05;

async function sudokuRequests(run: string, size: 4 | 9, members: number, tasksPerMember: number, seed: number): Promise<EpisodeRequest[]> {
  const sudoku = await loadEnvironment('sudoku');
  const options = sudoku.optionsSchema.parse({ size });
  return iterationRequests({
    run,
    iteration: 0,
    runSeed: seed,
    members: Array.from({ length: members }, (_, i) => i),
    tasks: sudoku.sampleTasks('train', tasksPerMember, seed, options),
    environment: { name: 'sudoku', options: { size } },
    policy: { baseUrl: 'scripted:oracle' },
    generation: { temperature: 0, topP: 1, topK: 0, maxTokens: 16 },
    deadline: new Date(Date.now() + 3_600_000),
  });
}

async function measureScaling(maxWorkers: number, perWorker: number, repeats: number, perInvocation: number, log: Log) {
  const dir = await mkdtemp(join(tmpdir(), 'esopt-bench-fanout-'));
  const sizes = Array.from({ length: maxWorkers }, (_, i) => i + 1);
  const pools = sizes.map((n) => localPool({ workers: n, store: { kind: 'fs', root: join(dir, `w${n}`) }, episodesPerInvocation: perInvocation }));
  const rates = sizes.map((): number[] => []);
  const spins = sizes.map((): number[] => []);
  const dispatcherCpu = sizes.map((): number[] => []);
  try {
    await Promise.all(pools.map((pool) => pool.warm()));
    // Every round's requests exist before the first round starts: generating puzzles between rounds
    // would leave the cores half idle there, and a vCPU that has just slept runs the next round slower.
    // A fresh run id each round: every episode really runs and writes (no duplicate skipping).
    const rounds = await Promise.all(
      Array.from({ length: repeats + 1 }, (_, r) => Promise.all(sizes.map((n) => sudokuRequests(`scale-${n}-${r}`, 9, n, perWorker, r)))),
    );
    // Rounds interleave the pool sizes (1, 2, …, 1, 2, …), so a shift in the machine's load touches
    // every size alike instead of whichever ran last; round 0 warms the workers' JIT.
    for (const [r, round] of rounds.entries()) {
      for (const [i, n] of sizes.entries()) {
        const requests = round[i];
        const t0 = performance.now();
        const cpu0 = process.cpuUsage();
        const outcomes = await pools[i].dispatch(requests, { concurrency: n, timeoutMs: 60_000 });
        const cpu = process.cpuUsage(cpu0);
        const seconds = (performance.now() - t0) / 1000;
        const failed = outcomes.filter((o) => !o.ok).length;
        if (failed) throw new Error(`${failed} episodes failed in the scaling run: ${outcomes.find((o) => !o.ok)?.error}`);
        // The machine's own scaling, measured right after the pool's round: the control (cpu-capacity.ts).
        const spin = await spinRate(n, CONTROL_MS);
        if (r > 0) {
          rates[i].push(requests.length / seconds);
          dispatcherCpu[i].push((cpu.user + cpu.system) / 1e6 / seconds);
          spins[i].push(spin);
        }
      }
    }
  } finally {
    await Promise.all(pools.map((pool) => pool.close()));
    await rm(dir, { recursive: true, force: true });
  }
  // The dispatching process's CPU time ÷ wall time: at N = cores it competes with the workers for the cores.
  const points = sizes.map((workers, i) => ({ workers, episodesPerS: median(rates[i]), dispatcherCpuShare: median(dispatcherCpu[i]), spinRate: median(spins[i]) }));
  for (const p of points) log(`  ${p.workers} worker(s): ${p.episodesPerS.toFixed(1)} episodes/s`);
  const [one] = points;
  return points.map((p) => ({ ...p, scaling: p.episodesPerS / (p.workers * one.episodesPerS), machineScaling: p.spinRate / (p.workers * one.spinRate) }));
}

const EndpointStats = z.object({ firstStartMs: z.number().nullable(), lastEndMs: z.number().nullable(), maxInjectedMs: z.number(), deliveries: z.number() });

async function measureOverhead(episodes: number, medianMs: number, concurrency: number, perInvocation: number, pollMs: number, log: Log) {
  const cloud = await startCloudProcesses({ latency: { kind: 'lognormal', medianMs, sigma: 0.5, maxMs: medianMs * 4 }, concurrency: episodes, seed: 3 });
  const store = bucketStore({ ...cloud.storeConfig, maxSockets: 256 });
  const fanout = lambdaFanout({
    functionName: EPISODE_FUNCTION,
    endpoint: cloud.invokeUrl,
    credentials: { accessKeyId: 'dev', secretAccessKey: 'dev' },
    episodesPerInvocation: perInvocation,
  });
  try {
    const tasks = 10;
    const requests = (await sudokuRequests('overhead', 4, Math.ceil(episodes / tasks), tasks, 5)).slice(0, episodes);
    log(`  ${requests.length} episodes in ${Math.ceil(requests.length / perInvocation)} Event invokes, injected latency lognormal(median ${medianMs} ms, σ 0.5) …`);
    const cpu0 = process.cpuUsage();
    const t0 = Date.now();
    // As in the ES loop (trainer/training/loop/episodes.ts, with the cloud site's wrapper): the Event fan-out
    // settles once every accepted request's record is listed or the caller says it has them all,
    // collection runs from the first invoke on, the iteration closes when every record is in (or the
    // fan-out has settled), and the loop then waits for the fan-out to settle.
    let dispatchedAt = t0;
    const awaiting = awaitingRecords(fanout, store);
    const recordsIn = new AbortController();
    const dispatching = awaiting.dispatch(requests, { concurrency, timeoutMs: 60_000, recordsIn: recordsIn.signal }).finally(() => (dispatchedAt = Date.now()));
    const got = await collectRewards(store, 'overhead', 0, {
      expected: requestedPairs(requests),
      pollMs,
      settled: dispatching,
      done: (snapshot, settled) => snapshot.records.length >= requests.length || settled,
    });
    const collectedAt = Date.now();
    if (got.records.length >= requests.length) recordsIn.abort();
    const accepted = (await dispatching).filter((o) => o.ok).length;
    const t1 = Date.now();
    const cpu = process.cpuUsage(cpu0);
    const stats = EndpointStats.parse(await (await fetch(`${cloud.invokeUrl}/dev/stats`)).json());
    if (got.records.length < accepted || stats.firstStartMs === null || stats.lastEndMs === null) throw new Error(`only ${got.records.length} of ${accepted} records arrived`);
    const iterationMs = t1 - t0;
    const spanMs = stats.lastEndMs - stats.firstStartMs;
    return {
      episodes: requests.length,
      episodes_per_invocation: perInvocation,
      poll_ms: pollMs,
      counted: got.counted,
      iteration_ms: iterationMs,
      episode_span_ms: spanMs,
      // The span can be no shorter than the longest injected latency; a much longer one means this
      // machine (the handler and s3rver share its cores) was the bottleneck, not the trainer's work.
      longest_injected_latency_ms: Math.round(stats.maxInjectedMs),
      /** Until the fan-out settled: with Event invokes, until its own listing found every record or the collection said it had them all. */
      dispatch_settled_ms: dispatchedAt - t0,
      collected_ms: collectedAt - t0,
      before_first_episode_ms: stats.firstStartMs - t0,
      collect_after_last_episode_ms: t1 - stats.lastEndMs,
      overhead_ratio: (iterationMs - spanMs) / iterationMs,
      /** CPU time of the trainer process (dispatch + collection only: the cloud runs in another process) ÷ wall time. */
      trainer_cpu_share: (cpu.user + cpu.system) / 1000 / iterationMs,
    };
  } finally {
    await fanout.close();
    store.destroy();
    await cloud.close();
  }
}

export const options = z.object({
  maxWorkers: int(1, 256).default(availableParallelism),
  perWorker: int(1, 10_000).default(200),
  repeats: int(1, 20).default(9),
  episodes: int(1, 100_000).default(1000),
  medianMs: z.coerce.number().min(1).max(600_000).default(2000),
  concurrency: int(1, 10_000).default(64),
  perInvocation: int(1, MAX_EPISODES_PER_INVOCATION).default(1),
  pollMs: int(10, 60_000).default(100),
});

export async function run(o: z.output<typeof options>, log: Log) {
  const { maxWorkers, perWorker, repeats, episodes, medianMs, concurrency, perInvocation, pollMs } = o;
  log(`scaling: local pool, 9×9 sudoku with the scripted oracle, ${perWorker} episodes per worker, N = 1 … ${maxWorkers}`);
  const points = await measureScaling(maxWorkers, perWorker, repeats, perInvocation, log);
  log('overhead: Lambda adapter → dev invoke endpoint → handler → s3rver → collector');
  const overhead = await measureOverhead(episodes, medianMs, concurrency, perInvocation, pollMs, log);
  const last = points[points.length - 1];
  const scaling = last.scaling;
  return {
    machine: machineInfo(),
    scaling,
    scaling_workers: last.workers,
    // The same ratio for threads that only compute: what the host gave N at once in the same rounds.
    machine_scaling: last.machineScaling,
    scaling_goal: SCALING_GOAL,
    episodes_per_invocation: perInvocation,
    scaling_points: points.map((q) => ({ workers: q.workers, episodes_per_s: q.episodesPerS, scaling: q.scaling, dispatcher_cpu_share: q.dispatcherCpuShare, machine_scaling: q.machineScaling })),
    overhead_ratio: overhead.overhead_ratio,
    overhead_goal: OVERHEAD_GOAL,
    overhead,
    meets_targets: { scaling: scaling >= SCALING_GOAL, overhead: overhead.overhead_ratio <= OVERHEAD_GOAL },
  };
}
