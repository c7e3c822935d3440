import { z } from 'zod';
import { ask } from '../../shared/es.ts';
import { machineInfo, median } from './measure.ts';
import { headDim, kvHeads } from '../model/config.ts';
import { createSession } from '../model/sessions.ts';
import { openModel } from '../model/open-model.ts';
import { modelSpecFlag } from '../command/model-flags.ts';
import { parameterCount } from '../model/weights.ts';
import { benchRows, tokensPerSecond } from './throughput.ts';
import { FactorCache } from '../perturbation/lowrank-factors.ts';
import { lowRankRewrite } from '../perturbation/lowrank-graph.ts';
import { flag, parseFlags } from '../command/args.ts';
import type { Command } from '../command/command.ts';

const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

export const command: Command = {
  name: 'bench lowrank',
  usage: 'esopt bench lowrank [--model small|NAME|DIR] [--batches 8,32] [--rank 1] [--prompt-tokens 16] [--new-tokens 48] [--repeats 9] [--threads N] [--provider cpu|cuda] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, {
      model: { type: 'string', default: 'small' },
      batches: { type: 'string', default: '8,32' },
      rank: { type: 'string', default: '1' },
      'prompt-tokens': { type: 'string', default: '16' },
      'new-tokens': { type: 'string', default: '48' },
      // Nine rounds: with three, one slow round of either side moved a median far enough to print B = 8
      // at 1.21 (low-rank faster than the model it adds work to) on the idle machine.
      repeats: { type: 'string', default: '9' },
      threads: { type: 'string' },
      provider: { type: 'string', default: 'cpu' },
    });
    const modelName = flag(p.values, 'model', z.string().min(1));
    const batches = flag(p.values, 'batches', z.string().regex(/^\d+(,\d+)*$/, 'comma-separated batch sizes')).split(',').map(Number);
    const rank = flag(p.values, 'rank', int(1, 64));
    const promptTokens = flag(p.values, 'prompt-tokens', int(1, 1024));
    const newTokens = flag(p.values, 'new-tokens', int(1, 1024));
    const repeats = flag(p.values, 'repeats', int(1, 50));
    const threads = flag(p.values, 'threads', int(1, 256).optional());
    const provider = flag(p.values, 'provider', z.enum(['cpu', 'cuda']));
    const log = (m: string) => { if (!p.json) io.stderr(m); };

    const model = openModel(modelSpecFlag(modelName, 0));
    const c = model.config;
    const shape = { layers: c.num_hidden_layers, kvHeads: kvHeads(c), headDim: headDim(c), vocabSize: c.vocab_size, hasPositionIds: model.graph.graph.input.some((i) => i.name === 'position_ids') };
    const sessionOptions = { executionProvider: provider, threads };
    const base = await createSession(model.graph, sessionOptions, model.dir);
    const rewritten = lowRankRewrite(model.graph, model.weights);
    const lowrank = await createSession(rewritten.model, sessionOptions, `${model.dir} (low-rank)`);
    const ctx = { shape, tokenizer: model.tokenizer, eosIds: new Set<number>(), padId: c.pad_token_id ?? 0 };

    const results = [];
    for (const B of batches) {
      const members = ask({ population: B, antithetic: false });
      const factors = new FactorCache(rewritten.targets, rewritten.groups, { runSeed: 1, iteration: 0, sigma: 0.01, rank, members }).feeds(members);
      const rows = benchRows(B, promptTokens, newTokens, c.vocab_size);
      const runBase = () => tokensPerSecond({ ...ctx, session: base, extraFeeds: {} }, rows);
      const runLowRank = () => tokensPerSecond({ ...ctx, session: lowrank, extraFeeds: factors }, rows);
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
    await Promise.all([base.release(), lowrank.release()]);
    const out = {
      model: modelName,
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
      target: 0.95,
      machine: machineInfo(),
    };
    if (p.json) io.stdout(JSON.stringify(out, null, 2));
    else io.stdout(`low-rank ÷ base tokens/s: ${results.map((r) => `B=${r.batch} ${r.ratio.toFixed(3)}`).join(', ')}; ratio (worst) ${out.ratio.toFixed(3)} (target ≥ 0.95)`);
    return 0;
  },
};
