/**
 * `esopt dev cloud`: one iteration of a small sudoku run through the cloud path on this machine —
 * the Lambda adapter (Event invokes) → the dev invoke endpoint → the Episode handler → the S3 adapter
 * → s3rver → the reward collector. With --faults the endpoint throttles, fails, dawdles and delivers
 * twice, and `counted` must still be the number of distinct (member, task) pairs that succeeded.
 * `--env web` runs a real ES iteration of web episodes instead (dev-cloud-web.ts); `--evaluate URL` a keyed
 * evaluation of that endpoint through the Api app, SSM and the trainer box (dev-cloud-keyed.ts).
 */
import { z } from 'zod';
import { startLocalCloud, EPISODE_FUNCTION } from '../../dev/local-cloud/local-cloud.ts';
import type { InvokeFaultsInput } from '../../dev/local-cloud/invoke-faults.ts';
import { loadEnvironment } from '../../../environments/index.ts';
import { RewardCollector } from '../../training/loop/index.ts';
import { iterationRequests } from '../../fanout/iteration-requests.ts';
import { lambdaFanout } from '../../assembly/fanouts.ts';
import { flag, parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { UsageError } from '../argv/usage-error.ts';
import { devCloudKeyed } from './dev-cloud-keyed.ts';
import { devCloudReplicas } from './dev-cloud-replicas.ts';
import { devCloudWeb } from './dev-cloud-web.ts';
import { measuredPrices } from '../../fanout/measured-prices.ts';

const FAULTS: InvokeFaultsInput = {
  throttleRate: 0.2,
  errorRate: 0.1,
  duplicateRate: 0.3,
  latency: { kind: 'uniform', minMs: 0, maxMs: 50 },
};
const TASKS_PER_MEMBER = 4;

export const command: Command = {
  name: 'dev cloud',
  usage:
    'esopt dev cloud [--episodes N] [--faults] [--seed S] [--policy oracle|random|URL] [--per-invocation K] [--json]\n' +
    'esopt dev cloud --env web [--population N] [--tasks N] [--seed S] [--json]: one ES iteration of web episodes, a tiny model served over TLS (pinned), the Lambda Chromium\n' +
    'esopt dev cloud --replicas R [--population N] [--iterations N] [--seed S] [--json]: a sudoku run over R trainer boxes on loopback, replica boxes following the coordinator, each pinned to its own certificate\n' +
    'esopt dev cloud --evaluate URL --model M [--episodes N] [--seed S] [--json]: a keyed evaluation of an OpenAI-compatible endpoint (key from ESOPT_EVAL_KEY) through the Api app, SSM, the trainer box and the Episode handler; then the bucket and the logs are searched for the key',
  async run(argv, io) {
    const p = parseFlags(argv, {
      episodes: { type: 'string', default: '16' },
      faults: { type: 'boolean', default: false },
      seed: { type: 'string', default: '1' },
      policy: { type: 'string', default: 'oracle' },
      'per-invocation': { type: 'string', default: '1' },
      env: { type: 'string', default: 'sudoku' },
      population: { type: 'string', default: '2' },
      tasks: { type: 'string', default: '2' },
      replicas: { type: 'string' },
      iterations: { type: 'string', default: '2' },
      evaluate: { type: 'string' },
      model: { type: 'string' },
    });
    const env = flag(p.values, 'env', z.enum(['sudoku', 'web']));
    const episodes = flag(p.values, 'episodes', z.coerce.number().int().min(1).max(10_000));
    const seed = flag(p.values, 'seed', z.coerce.number().int().min(0).max(0xffffffff));
    const policy = flag(p.values, 'policy', z.union([z.enum(['oracle', 'random']), z.url()]));
    const perInvocation = flag(p.values, 'per-invocation', z.coerce.number().int().min(1).max(64));
    const log = (m: string) => {
      if (!p.json) io.stderr(m);
    };
    if (p.values.evaluate !== undefined) {
      const baseUrl = flag(p.values, 'evaluate', z.url({ protocol: /^https?$/ }));
      const model = flag(p.values, 'model', z.string().min(1).max(200));
      // Never a flag: a command line is visible to every user of the machine.
      const apiKey = process.env.ESOPT_EVAL_KEY;
      if (!apiKey) throw new UsageError("ESOPT_EVAL_KEY is not set (the endpoint's API key)");
      const report = await devCloudKeyed({ baseUrl, model, apiKey, episodes: Math.min(episodes, 64), seed, log });
      io.stdout(
        p.json
          ? JSON.stringify(report)
          : [
              `evaluation ${report.evaluation} ${report.state}${report.error ? `: ${report.error}` : ''}; episodes ${report.episodes}  failed ${report.failed}  mean reward ${report.mean_reward ?? 'n/a'}`,
              `SSM: put ${report.ssm.put}, get ${report.ssm.get}, delete ${report.ssm.delete}, left ${report.ssm.left}; key found in ${report.key_found_in.length ? report.key_found_in.join(', ') : 'nothing'} (${report.objects_searched} objects, ${report.log_lines_searched} log lines searched)`,
            ].join('\n'),
      );
      return report.state === 'finished' && report.failed === 0 && report.key_found_in.length === 0 && report.ssm.left === 0 ? 0 : 1;
    }
    if (p.values.replicas !== undefined) {
      const replicas = flag(p.values, 'replicas', z.coerce.number().int().min(2).max(8));
      const population = flag(p.values, 'population', z.coerce.number().int().min(2).max(64));
      const iterations = flag(p.values, 'iterations', z.coerce.number().int().min(1).max(20));
      const report = await devCloudReplicas({ replicas, seed, population, iterations, log });
      io.stdout(
        p.json
          ? JSON.stringify(report)
          : [
              `episodes ${report.episodes}  failed ${report.failed}; routed per iteration: ${report.routed.map((r) => r.join('+')).join(' | ')}`,
              ...report.boxes.map((b) => `${b.id} at ${b.url} pinned to ${b.sha256.slice(0, 23)}…`),
              `θ ${report.theta.slice(0, 12)}; replicas: ${Object.entries(report.replica_theta).map(([id, h]) => `${id} ${h?.slice(0, 12) ?? 'no report'}`).join(', ')}`,
            ].join('\n'),
      );
      const agree = Object.values(report.replica_theta).every((h) => h === report.theta);
      return report.failed === 0 && report.episodes > 0 && agree ? 0 : 1;
    }
    if (env === 'web') {
      const population = flag(p.values, 'population', z.coerce.number().int().min(2).max(64));
      const tasks = flag(p.values, 'tasks', z.coerce.number().int().min(1).max(24));
      const report = await devCloudWeb({ seed, population, tasks, log });
      io.stdout(
        p.json
          ? JSON.stringify(report)
          : [
              `web episodes ${report.episodes} (${report.task_types.join(', ')})  failed ${report.failed}  mean reward ${report.mean_reward ?? 'n/a'}`,
              `update counted ${report.update.counted}; θ ${report.update.theta_before.slice(0, 12)} → ${report.update.theta_after.slice(0, 12)}; trainer link ${report.link.url} pinned to ${report.link.sha256.slice(0, 23)}…`,
            ].join('\n'),
      );
      return report.failed === 0 && report.episodes > 0 ? 0 : 1;
    }

    const cloud = await startLocalCloud({ prices: measuredPrices(), faults: p.values.faults ? { ...FAULTS, seed } : { seed } });
    const fanout = lambdaFanout({
      functionName: EPISODE_FUNCTION,
      endpoint: cloud.invoke.url,
      credentials: { accessKeyId: 'dev', secretAccessKey: 'dev' },
      invocationType: 'Event',
      episodesPerInvocation: perInvocation,
      backoffBaseMs: 20,
      backoffMaxMs: 500,
    });
    try {
      log(`s3rver at ${cloud.s3.endpoint}, invoke endpoint at ${cloud.invoke.url}${p.values.faults ? ' (faults on)' : ''}`);
      const sudoku = await loadEnvironment('sudoku');
      const options = sudoku.optionsSchema.parse({ size: 4 });
      const members = Math.ceil(episodes / TASKS_PER_MEMBER);
      const run = `dev-cloud-${seed}`;
      const deadline = new Date(Date.now() + 120_000);
      const requests = iterationRequests({
        run,
        iteration: 0,
        runSeed: seed,
        members: Array.from({ length: members }, (_, i) => i),
        tasks: sudoku.sampleTasks('train', Math.min(TASKS_PER_MEMBER, episodes), seed, options),
        environment: { name: 'sudoku', options: { size: 4 } },
        policy: policy === 'oracle' || policy === 'random' ? { baseUrl: `scripted:${policy}` } : { baseUrl: policy, tokenEnv: 'ESOPT_TOKEN' },
        generation: { temperature: 0, topP: 1, topK: 0, maxTokens: 16 },
        deadline,
      }).slice(0, episodes);
      log(`dispatching ${requests.length} episodes (${members} members) as Event invokes …`);
      const outcomes = await fanout.dispatch(requests, { concurrency: 32, timeoutMs: 30_000 });
      const notAccepted = outcomes.filter((o) => !o.ok);
      const expected = requests.length - notAccepted.length;
      log(`${expected} accepted; collecting rewards from the bucket …`);
      const collector = new RewardCollector(cloud.store, run, 0);
      const collected = await collector.until(expected, { deadline: deadline.getTime() });
      // Let late duplicate deliveries finish too, then look once more: they must change nothing.
      await cloud.invoke.drained();
      const final = await collector.poll();
      const records = (await cloud.store.list(`runs/${run}/`)).length;
      const report = {
        episodes: requests.length,
        records,
        counted: final.counted,
        duplicates_ignored: cloud.tally.duplicates + final.duplicatesIgnored,
        failed: final.failed + notAccepted.length + (expected - final.records.length),
        complete: collected.complete,
        invalid: final.invalid.length,
        faults: {
          enabled: p.values.faults === true,
          invoke_calls: cloud.invoke.stats.calls,
          throttled: cloud.invoke.stats.throttled,
          server_errors: cloud.invoke.stats.serverErrors,
          deliveries: cloud.invoke.stats.deliveries,
          duplicate_deliveries: cloud.invoke.stats.duplicateDeliveries,
          client_retries: fanout.stats.retries,
        },
        cost_usd: final.records.reduce((s, r) => s + r.cost.usd, 0),
        mean_reward: final.records.length ? final.records.reduce((s, r) => s + r.reward, 0) / final.records.length : null,
      };
      io.stdout(
        p.json
          ? JSON.stringify(report)
          : [
              `episodes ${report.episodes}  records ${report.records}  counted ${report.counted}  duplicates ignored ${report.duplicates_ignored}  failed ${report.failed}`,
              `invoke calls ${report.faults.invoke_calls} (throttled ${report.faults.throttled}, 5xx ${report.faults.server_errors}), deliveries ${report.faults.deliveries} (duplicates ${report.faults.duplicate_deliveries})`,
              `mean reward ${report.mean_reward ?? 'n/a'}, estimated cost $${report.cost_usd.toExponential(3)}`,
            ].join('\n'),
      );
      return report.failed === 0 && report.counted + final.failed === report.records ? 0 : 1;
    } finally {
      await fanout.close();
      await cloud.close();
    }
  },
};
