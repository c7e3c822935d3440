/**
 * `esopt bench lora`: LoRA-ES beside full mode at one model, in one run, each as a ratio to the model's own
 * baseline: a member switch ÷ one episode of `newTokens` tokens (full: an exact perturb + restore of all θ on
 * one thread, the engine's switch below 2^29 elements; lora: a member's noise over the adapter vector into the
 * population's stacks), tokens/s of `population` rows of distinct members through the engine ÷ the plain
 * model's tokens/s on the same rows in one batch (the plain model as an inference server holds it:
 * createServingSession, the engine's attention form, W prepacked and held once), and peak RSS of a training
 * child ÷ an inference-only child making the same calls (memory-probe.ts): full mode against `bench memory`'s
 * generate child (θ held once as graph inputs, one member's rows a call, as full mode decodes), LoRA against
 * the serve child (the plain model as a server holds it, the population's rows in one call, as LoRA decodes;
 * neither caches prefixes). The engines are built one at a time, so no two copies of the model are alive
 * together, and without the prefix cache, so every round prefills.
 */
import { z } from 'zod';
import { ask } from '../../../shared/es.ts';
import { LoraOptions } from '../../../shared/lora.ts';
import type { Member } from '../../../shared/schemas/index.ts';
import type { Engine, GenerateRow, MemberSelector } from '../../engine/engine.ts';
import { modelSpecFlag } from '../../engine/model/presets.ts';
import { openEngineOn } from '../../assembly/engine.ts';
import { loraMatrices } from '../../engine/model/lora-matrices.ts';
import { openModel } from '../../engine/model/open-model.ts';
import { createServingSession } from '../../engine/model/create-engine.ts';
import { parameterCount } from '../../engine/model/weights.ts';
import { perturb, restore } from '../../engine/perturbation/exact-perturbation.ts';
import { LoraStacks } from '../../engine/perturbation/lora-stacks.ts';
import type { Log } from './benchmark.ts';
import { decodeContext } from './decode-context.ts';
import { machineInfo, median, timeMs } from './measure.ts';
import { runChild } from './memory.ts';
import { int, ModelName, Provider, Repeats, Threads } from './options.ts';
import { benchRows, tokensPerSecond } from './throughput.ts';

export const options = z.object({
  model: ModelName('small'),
  loraRank: int(1, 256).default(16),
  loraAlpha: z.coerce.number().positive().finite().default(32),
  // `all`, `all-linear`, or one pattern (PEFT's `q_proj,v_proj`, or a regex) for shared/targets.ts
  targets: z.string().min(1).default('all-linear'),
  population: int(2, 1024).refine((n) => n % 2 === 0, 'must be even (antithetic pairs)').default(8),
  promptTokens: int(1, 1024).default(32),
  newTokens: int(1, 4096).default(32),
  sigma: z.coerce.number().positive().max(1).default(0.001),
  repeats: Repeats(3),
  // training iterations of each memory child; 0 skips the memory children
  memoryIterations: int(0, 100).default(2),
  threads: Threads,
  provider: Provider,
});

/** The per-mode figures, side by side in the result. */
interface ModeFigures {
  switch_ms: number;
  episode_ms: number;
  switch_ratio: number;
  tokens_per_s: number;
  tokens_ratio: number;
  peak_rss_mib: number | null;
  rss_ratio: number | null;
}

export async function run(o: z.output<typeof options>, log: Log) {
  const spec = modelSpecFlag(o.model, 0);
  const lora = LoraOptions.parse({ rank: o.loraRank, alpha: o.loraAlpha, targets: o.targets === 'all' || o.targets === 'all-linear' ? o.targets : { include: [o.targets] } });
  const sessionOptions = { executionProvider: o.provider, threads: o.threads };
  const members = ask({ population: o.population, antithetic: true });
  const population = { runSeed: 1, iteration: 0, sigma: o.sigma, rank: 1, members };
  const row = (member: MemberSelector, b: number): GenerateRow => ({
    promptIds: Array.from({ length: o.promptTokens }, (_, j) => (b * 31 + j * 7 + 1) % 256),
    member,
    sampling: { temperature: 0, topP: 1, topK: 0, seed: b },
    maxNewTokens: o.newTokens,
    stop: [],
    ignoreEos: true,
  });
  const memberRows = members.map((m, b) => row({ kind: 'member', iteration: 0, index: m.index }, b));

  // --- the plain model as a server holds it: W prepacked, held once; every row in one batch ---
  let parameters: number;
  let baseTokensPerS: number;
  {
    const model = openModel(spec);
    parameters = parameterCount(model.weights);
    const ctx0 = decodeContext(model);
    const session = await createServingSession(model, { model: spec, mode: 'full', ...sessionOptions });
    const rows = benchRows(o.population, o.promptTokens, o.newTokens, model.config.vocab_size);
    const ctx = { ...ctx0, session, extraFeeds: {} };
    log(`base: ${o.population} rows × ${o.newTokens} tokens in one batch, ${o.repeats} rounds`);
    await tokensPerSecond(ctx, rows);
    const t: number[] = [];
    for (let r = 0; r < o.repeats; r++) t.push(await tokensPerSecond(ctx, rows));
    baseTokensPerS = median(t);
    await session.release();
  }

  /** One episode (batch 1, a base row: no switch) and the members' rows in one generate call. */
  const decodeFigures = async (engine: Engine) => {
    // warm-up: the session's shapes for one row and for the members' batch
    engine.setPopulation(population);
    await engine.generate([row({ kind: 'base' }, 0)]);
    await engine.generate(memberRows);
    const episode: number[] = [];
    const tokens: number[] = [];
    for (let r = 0; r < o.repeats; r++) {
      episode.push(await timeMs(() => engine.generate([row({ kind: 'base' }, 0)])));
      // a fresh population each round: no member's factors are cached from the round before
      engine.setPopulation({ ...population });
      tokens.push((o.population * o.newTokens) / ((await timeMs(() => engine.generate(memberRows))) / 1000));
    }
    engine.setPopulation(null);
    return { episode_ms: median(episode), tokens_per_s: median(tokens) };
  };

  // --- full mode: θ as inputs ---
  log(`full mode: a switch (perturb + restore of ${parameters} parameters, one thread), an episode, ${o.population} members' rows`);
  const full = await openEngineOn(openModel(spec), { model: spec, mode: 'full', maxBatch: o.population, switchThreads: 1, prefixCacheBytes: 0, ...sessionOptions });
  let fullFigures;
  try {
    const switches: number[] = [];
    await full.withRestoredWeights(async (segments) => {
      restore(segments, perturb(segments, { runSeed: 1, iteration: 0, member: 999 }, o.sigma));
      for (let r = 0; r < o.repeats; r++) switches.push(await timeMs(() => restore(segments, perturb(segments, { runSeed: 1, iteration: 0, member: r }, o.sigma))));
    });
    fullFigures = { switch_ms: median(switches), ...(await decodeFigures(full)) };
  } finally {
    await full.close();
  }

  // --- lora mode: θ's adapters and the population's noise stacks shared by every row, a mask per row ---
  const model = openModel(spec);
  const { layout } = loraMatrices(model, lora);
  log(`lora mode: rank ${lora.rank} on ${layout.slots.length} matrices (${layout.length} adapter parameters), a switch (a member's noise into the stacks), an episode, ${o.population} members' rows`);
  const adapted = await openEngineOn(model, { model: spec, mode: 'lora', lora: { ...lora, seed: 0 }, maxBatch: o.population, prefixCacheBytes: 0, ...sessionOptions });
  let loraFigures;
  try {
    // what LoraMembers does for a noise index the population has not met yet: its ε into each matrix's stacks
    const switchTo = (m: Member) => new LoraStacks(layout, population).ensure(m.noiseIndex);
    for (const m of members.slice(0, 3)) switchTo(m);
    const switches: number[] = [];
    for (let r = 0; r < o.repeats; r++) switches.push(await timeMs(() => switchTo(members[r % members.length])));
    loraFigures = { switch_ms: median(switches), ...(await decodeFigures(adapted)) };
  } finally {
    await adapted.close();
  }

  // --- peak RSS: an inference-only child, a full-mode training child, a lora training child ---
  let rss: { inference: number; serve: number; full: number; lora: number } | null = null;
  if (o.memoryIterations > 0) {
    const common = { model: o.model, population: o.population, batch: 1, promptTokens: o.promptTokens, newTokens: o.newTokens, iterations: o.memoryIterations };
    log('memory child 1/4: inference only, as full mode calls (the base model, θ held once as inputs, a member\'s rows a call: bench memory\'s generate child)');
    const inference = (await runChild({ ...common, workload: 'generate', mode: 'full', fullModeWeights: 'inputs' })).maxRssKiB;
    log('memory child 2/4: full-mode training');
    const fullRss = (await runChild({ ...common, workload: 'train', mode: 'full', fullModeWeights: 'inputs' })).maxRssKiB;
    log('memory child 3/4: inference only, as LoRA calls (the plain model as a server holds it, the population\'s rows in one call, no prefix cache)');
    const serve = (await runChild({ ...common, workload: 'serve', mode: 'lora', fullModeWeights: 'inputs', lora })).maxRssKiB;
    log('memory child 4/4: lora-mode training (no prefix cache)');
    const loraRss = (await runChild({ ...common, workload: 'train', mode: 'lora', fullModeWeights: 'inputs', lora, prefixCacheBytes: 0 })).maxRssKiB;
    rss = { inference: inference / 1024, serve: serve / 1024, full: fullRss / 1024, lora: loraRss / 1024 };
  }

  const figures = (f: { switch_ms: number; episode_ms: number; tokens_per_s: number }, peak: number | null, inference: number | null): ModeFigures => ({
    switch_ms: f.switch_ms,
    episode_ms: f.episode_ms,
    switch_ratio: f.switch_ms / f.episode_ms,
    tokens_per_s: f.tokens_per_s,
    tokens_ratio: f.tokens_per_s / baseTokensPerS,
    peak_rss_mib: peak,
    rss_ratio: peak === null || inference === null ? null : peak / inference,
  });
  return {
    model: o.model,
    parameters,
    lora: { rank: lora.rank, alpha: lora.alpha, targets: lora.targets, matrices: layout.slots.length, adapter_parameters: layout.length },
    population: o.population,
    prompt_tokens: o.promptTokens,
    new_tokens: o.newTokens,
    repeats: o.repeats,
    base_tokens_per_s: baseTokensPerS,
    inference_peak_rss_mib: rss?.inference ?? null,
    serve_peak_rss_mib: rss?.serve ?? null,
    full: figures(fullFigures, rss?.full ?? null, rss?.inference ?? null),
    lora_mode: figures(loraFigures, rss?.lora ?? null, rss?.serve ?? null),
    provider: o.provider,
    machine: machineInfo(),
  };
}
