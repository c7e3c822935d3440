/**
 * `esopt bench lowrank`: tokens/s of B rows from B different members in one low-rank batch ÷ tokens/s of
 * the unperturbed model at the same batch, in interleaved rounds.
 */
import { z } from 'zod';
import { ask } from '../../../shared/es.ts';
import { modelSpecFlag } from '../../engine/model/presets.ts';
import { openModel } from '../../engine/model/open-model.ts';
import { createSession } from '../../engine/model/sessions.ts';
import { parameterCount } from '../../engine/model/weights.ts';
import { FactorCache } from '../../engine/perturbation/lowrank-factors.ts';
import { lowRankRewrite } from '../../engine/perturbation/lowrank-graph.ts';
import type { Log } from './benchmark.ts';
import { benchDevice, decodeContext } from './decode-context.ts';
import { machineInfo, median } from './measure.ts';
import { BatchList, int, ModelName, Provider, Repeats, Threads } from './options.ts';
import { benchRows, tokensPerSecond } from './throughput.ts';

export const options = z
  .object({
    model: ModelName('small'),
    batches: BatchList('8,32'),
    rank: int(1, 64).default(1),
    promptTokens: int(1, 1024).default(16),
    newTokens: int(1, 1024).default(48),
    // Nine rounds: with three, one slow round of either side moved a median far enough to print a ratio above 1.
    repeats: Repeats(9),
    threads: Threads,
    provider: Provider,
  });

export async function run(o: z.output<typeof options>, log: Log) {
  const { batches, rank, promptTokens, newTokens, repeats, threads, provider } = o;
  const model = openModel(modelSpecFlag(o.model, 0));
  const c = model.config;
  const sessionOptions = { executionProvider: provider, threads };
  const base = await createSession(model.graph, sessionOptions, model.dir);
  const rewritten = lowRankRewrite(model.graph, model.weights);
  const lowrank = await createSession(rewritten.model, sessionOptions, `${model.dir} (low-rank)`);
  const ctx = { ...decodeContext(model), device: await benchDevice(model, sessionOptions) };

  const results = [];
  for (const B of batches) {
    const members = ask({ population: B, antithetic: false });
    const factorCache = new FactorCache(rewritten.targets, rewritten.groups, { runSeed: 1, iteration: 0, sigma: 0.01, rank, members });
    const all = factorCache.feeds(members);
    // every row runs to the same length, so the batch never shrinks and the factors are assembled once
    const factors = (rows: number[]) => (rows.length === B ? all : factorCache.feeds(rows.map((b) => members[b])));
    const rows = benchRows(B, promptTokens, newTokens, c.vocab_size);
    const runBase = () => tokensPerSecond({ ...ctx, session: base, extraFeeds: {} }, rows);
    const runLowRank = () => tokensPerSecond({ ...ctx, session: lowrank, extraFeeds: {}, rowFeeds: factors }, rows);
    log(`batch ${B}: warm-up, then ${repeats} interleaved rounds of base and low-rank (${newTokens} new tokens a row)`);
    await runBase();
    await runLowRank();
    const baseTps: number[] = [];
    const lowTps: number[] = [];
    for (let r = 0; r < repeats; r++) {
      // alternate which goes first so drift in machine load hits both alike
      if (r % 2 === 0) {
        baseTps.push(await runBase());
        lowTps.push(await runLowRank());
      } else {
        lowTps.push(await runLowRank());
        baseTps.push(await runBase());
      }
    }
    const entry = { batch: B, base_tokens_per_s: median(baseTps), lowrank_tokens_per_s: median(lowTps), ratio: median(lowTps) / median(baseTps) };
    log(`  base ${entry.base_tokens_per_s.toFixed(1)} tok/s, low-rank ${entry.lowrank_tokens_per_s.toFixed(1)} tok/s, ratio ${entry.ratio.toFixed(3)}`);
    results.push(entry);
  }
  await Promise.all([base.release(), lowrank.release(), ctx.device?.release()]);
  return {
    model: o.model,
    parameters: parameterCount(model.weights),
    perturbed_matrices: rewritten.targets.length,
    factor_groups: rewritten.groups.length,
    rank,
    prompt_tokens: promptTokens,
    new_tokens: newTokens,
    repeats,
    provider,
    batches: results,
    ratio: Math.min(...results.map((r) => r.ratio)),
    goal: 0.95,
    machine: machineInfo(),
  };
}
