import { availableParallelism } from 'node:os';
import * as ort from 'onnxruntime-node';
import { z } from 'zod';
import { layoutSegments, perturbDense } from '../../shared/es.ts';
import type { ParameterSegment } from '../../shared/es.ts';
import { machineInfo, median, timeMs } from './measure.ts';
import { headDim, kvHeads } from '../model/config.ts';
import { createSession, INLINE_SESSION_LIMIT, sessionOptionsFor } from '../model/sessions.ts';
import { createOrtFormatSession, ortFormatModel } from '../model/ort-format.ts';
import { openModel } from '../model/open-model.ts';
import { modelSpecFlag } from '../command/model-flags.ts';
import { parameterCount } from '../model/weights.ts';
import { benchRows, tokensPerSecond } from './throughput.ts';
import { perturb, restore, switchPerturbation } from '../perturbation/exact-perturbation.ts';
import { PerturbationPool } from '../perturbation/perturbation-pool.ts';
import { weightsAsInputs } from '../perturbation/weights-as-inputs.ts';
import { flag, parseFlags } from '../command/args.ts';
import type { Command } from '../command/command.ts';

const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);

function rms(segments: readonly ParameterSegment[]): number {
  let ss = 0;
  let n = 0;
  for (const s of segments) for (let i = 0; i < s.data.length; i++) (ss += s.data[i] * s.data[i]), n++;
  return Math.sqrt(ss / n);
}

function maxDrift(segments: readonly ParameterSegment[], original: readonly Float32Array[]): number {
  let m = 0;
  segments.forEach((s, k) => {
    for (let i = 0; i < s.data.length; i++) m = Math.max(m, Math.abs(s.data[i] - original[k][i]));
  });
  return m;
}

export const command: Command = {
  name: 'bench full',
  usage: 'esopt bench full [--model small|NAME|DIR] [--batches 1,8] [--episode-tokens 256] [--prompt-tokens 64] [--sigma 0.001] [--cycles 1000] [--drift-model tiny|NAME|DIR] [--repeats 3] [--threads N] [--switch-threads N] [--provider cpu|cuda] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, {
      model: { type: 'string', default: 'small' },
      batches: { type: 'string', default: '1,8' },
      'episode-tokens': { type: 'string', default: '256' },
      'prompt-tokens': { type: 'string', default: '64' },
      sigma: { type: 'string', default: '0.001' },
      cycles: { type: 'string', default: '1000' },
      'drift-model': { type: 'string', default: 'tiny' },
      repeats: { type: 'string', default: '3' },
      threads: { type: 'string' },
      'switch-threads': { type: 'string', default: String(availableParallelism()) },
      provider: { type: 'string', default: 'cpu' },
    });
    const modelName = flag(p.values, 'model', z.string().min(1));
    const batches = flag(p.values, 'batches', z.string().regex(/^\d+(,\d+)*$/, 'comma-separated batch sizes')).split(',').map(Number);
    const episodeTokens = flag(p.values, 'episode-tokens', int(1, 4096));
    const promptTokens = flag(p.values, 'prompt-tokens', int(1, 1024));
    const sigma = flag(p.values, 'sigma', z.coerce.number().positive().max(1));
    const cycles = flag(p.values, 'cycles', int(1, 100_000));
    const driftName = flag(p.values, 'drift-model', z.string().min(1));
    const repeats = flag(p.values, 'repeats', int(1, 50));
    const threads = flag(p.values, 'threads', int(1, 256).optional());
    const switchThreads = flag(p.values, 'switch-threads', int(1, 256));
    const provider = flag(p.values, 'provider', z.enum(['cpu', 'cuda']));
    const log = (m: string) => { if (!p.json) io.stderr(m); };

    const model = openModel(modelSpecFlag(modelName, 0));
    const c = model.config;
    const shape = { layers: c.num_hidden_layers, kvHeads: kvHeads(c), headDim: headDim(c), vocabSize: c.vocab_size, hasPositionIds: true };
    const opts = { executionProvider: provider, threads };
    const ctx = { shape, tokenizer: model.tokenizer, eosIds: new Set<number>(), padId: c.pad_token_id ?? 0 };
    const segments = layoutSegments(model.weights);
    const weightFeeds = Object.fromEntries(model.weights.map((w) => [w.name, new ort.Tensor('float32', w.data, w.dims)]));
    const withInitializers = await createSession(model.graph, opts, model.dir);
    const withInputs = await createSession(weightsAsInputs(model.graph, model.weights), opts, `${model.dir} (θ as inputs)`);

    // --- θ as graph inputs vs θ as initializers, same graph otherwise ---
    const inputVsInit = [];
    for (const B of batches) {
      const rows = benchRows(B, promptTokens, 64, c.vocab_size);
      const init = () => tokensPerSecond({ ...ctx, session: withInitializers, extraFeeds: {} }, rows);
      const inputs = () => tokensPerSecond({ ...ctx, session: withInputs, extraFeeds: weightFeeds }, rows);
      log(`batch ${B}: θ as initializers vs θ as inputs, ${repeats} interleaved rounds`);
      await init();
      await inputs();
      const a: number[] = [];
      const b: number[] = [];
      for (let r = 0; r < repeats; r++) {
        if (r % 2 === 0) (a.push(await init()), b.push(await inputs()));
        else (b.push(await inputs()), a.push(await init()));
      }
      inputVsInit.push({ batch: B, initializer_tokens_per_s: median(a), input_tokens_per_s: median(b), ratio: median(b) / median(a) });
      log(`  initializers ${median(a).toFixed(1)} tok/s, inputs ${median(b).toFixed(1)} tok/s`);
    }

    // --- member switch (exact perturb + restore of all θ) vs one episode of that member's tokens ---
    // Two ways side by side, alternating: this thread alone (exact-perturbation.ts; the engine's default
    // below 2^29 elements) and θ's tensors lent to `switchThreads − 1` workers (perturbation-pool.ts).
    // The pool works on its own copy of θ, because lending replaces the views that the feeds and the
    // graph's initializers hold.
    log(`switch: perturb+restore ${parameterCount(model.weights)} parameters on 1 and ${switchThreads} threads vs generating ${episodeTokens} tokens (batch 1)`);
    const pool = await PerturbationPool.create(switchThreads - 1);
    const pooled = layoutSegments(model.weights.map((w) => ({ name: w.name, data: w.data.slice() })));
    const key = (r: number) => ({ runSeed: 1, iteration: 0, member: r });
    restore(segments, perturb(segments, key(999), sigma)); // warm-up, both ways
    await pool.restore(pooled, await pool.perturb(pooled, key(999), sigma));
    const oneThreadMs: number[] = [];
    const threadedMs: number[] = [];
    // The one-thread switch runs on this thread alone, so its CPU time shows how much of its wall time is
    // waiting for a core on a shared machine (the ratio itself stays wall time against wall time).
    const oneThreadCpuMs: number[] = [];
    let fixups = 0;
    const oneThread = async (r: number) => {
      const cpu0 = process.cpuUsage();
      oneThreadMs.push(await timeMs(() => {
        const pert = perturb(segments, key(r), sigma);
        fixups += pert.fixupCount;
        restore(segments, pert);
      }));
      const cpu = process.cpuUsage(cpu0);
      oneThreadCpuMs.push((cpu.user + cpu.system) / 1000);
    };
    const threaded = async (r: number) => threadedMs.push(await timeMs(async () => pool.restore(pooled, await pool.perturb(pooled, key(r), sigma))));
    for (let r = 0; r < repeats; r++) {
      if (r % 2 === 0) (await oneThread(r), await threaded(r));
      else (await threaded(r), await oneThread(r));
    }
    // An antithetic pair served back to back (the engine's order): perturb +, switch to − in one pass, restore.
    const pairOneThreadMs: number[] = [];
    const pairThreadedMs: number[] = [];
    for (let r = 0; r < repeats; r++) {
      pairOneThreadMs.push(await timeMs(() => {
        const plus = perturb(segments, key(500 + r), sigma);
        restore(segments, switchPerturbation(segments, plus, -sigma));
      }));
      pairThreadedMs.push(await timeMs(async () => {
        const plus = await pool.perturb(pooled, key(500 + r), sigma);
        await pool.restore(pooled, await pool.switchTo(pooled, plus, -sigma));
      }));
    }
    await pool.close();
    const episodeRows = benchRows(1, promptTokens, episodeTokens, c.vocab_size);
    const episodeMs: number[] = [];
    for (let r = 0; r < repeats; r++) {
      episodeMs.push(await timeMs(() => tokensPerSecond({ ...ctx, session: withInputs, extraFeeds: weightFeeds }, episodeRows)));
    }
    // The alternative design, rebuild-session: an initializer session made for each member from the
    // perturbed θ. Two ways, as the engine has them: θ inside an ORT-format model, a session made from its
    // bytes (ort-format.ts; one switch thread, θ under 2 GiB), and encoding the graph whose initializer
    // bytes are views onto θ (otherwise). The ORT-format model holds its own copy of θ here.
    const ortModel = await ortFormatModel(model.graph, model.weights, sessionOptionsFor(opts), model.dir, INLINE_SESSION_LIMIT);
    const ortSegments = layoutSegments(model.weights.map((w, i) => ({ name: w.name, data: ortModel.views[i] })));
    const memberSessionFromBytes = () => createOrtFormatSession(ortModel, sessionOptionsFor(opts), `${model.dir} (member session)`);
    const rebuildMs: number[] = [];
    for (let r = 0; r < repeats; r++) {
      rebuildMs.push(await timeMs(async () => {
        const pert = perturb(ortSegments, key(r), sigma);
        const s = await memberSessionFromBytes();
        restore(ortSegments, pert);
        await s.release();
      }));
    }
    const rebuildEncodeMs: number[] = [];
    for (let r = 0; r < Math.min(repeats, 2); r++) {
      rebuildEncodeMs.push(await timeMs(async () => {
        const pert = perturb(segments, key(r), sigma);
        const s = await createSession(model.graph, opts, `${model.dir} (member session)`);
        restore(segments, pert);
        await s.release();
      }));
    }
    // A rebuilt session generates at initializer speed: timed here on one made from the ORT-format bytes.
    const rebuiltSession = await memberSessionFromBytes();
    const rebuildEpisodeMs: number[] = [];
    for (let r = 0; r < repeats; r++) {
      rebuildEpisodeMs.push(await timeMs(() => tokensPerSecond({ ...ctx, session: rebuiltSession, extraFeeds: {} }, episodeRows)));
    }
    await rebuiltSession.release();

    // --- drift after many cycles, exact scheme vs plain subtraction ---
    log(`drift: ${cycles} perturb/restore cycles on ${driftName}'s θ, exact scheme and plain subtraction`);
    const driftModel = openModel(modelSpecFlag(driftName, 0));
    const exactSegs = layoutSegments(driftModel.weights.map((w) => ({ name: w.name, data: w.data.slice() })));
    const plainSegs = layoutSegments(driftModel.weights.map((w) => ({ name: w.name, data: w.data.slice() })));
    const original = driftModel.weights.map((w) => w.data);
    for (let k = 0; k < cycles; k++) {
      const cs = (k % 2 ? -1 : 1) * sigma;
      restore(exactSegs, perturb(exactSegs, key(k), cs));
      perturbDense(plainSegs, key(k), cs);
      perturbDense(plainSegs, key(k), -cs);
    }
    const thetaRms = rms(exactSegs);

    await Promise.all([withInitializers.release(), withInputs.release()]);
    const switchRatio = median(oneThreadMs) / median(episodeMs);
    const out = {
      model: modelName,
      parameters: parameterCount(model.weights),
      provider,
      sigma,
      // One thread: what the engine does by default for θ under 2^29 elements (create-engine.ts).
      switch_ms: median(oneThreadMs),
      switch_cpu_ms: median(oneThreadCpuMs),
      episode_ms: median(episodeMs),
      episode_tokens: episodeTokens,
      switch_ratio: switchRatio,
      /** Per member when antithetic partners run back to back: (perturb + switch + restore) ÷ 2. */
      antithetic_switch_ms: median(pairOneThreadMs) / 2,
      antithetic_switch_ratio: median(pairOneThreadMs) / 2 / median(episodeMs),
      // θ's tensors lent to worker threads (the engine's `switchThreads`), measured alternately with the above.
      switch_threads: switchThreads,
      switch_ms_threaded: median(threadedMs),
      switch_ratio_threaded: median(threadedMs) / median(episodeMs),
      antithetic_switch_ratio_threaded: median(pairThreadedMs) / 2 / median(episodeMs),
      /** One-thread switch time ÷ threaded switch time. */
      switch_speedup: median(oneThreadMs) / median(threadedMs),
      fixup_fraction: fixups / repeats / parameterCount(model.weights),
      /** rebuild-session, θ in an ORT-format model: perturb + member session from its bytes + restore. */
      rebuild_session_switch_ms: median(rebuildMs),
      rebuild_session_episode_ms: median(rebuildEpisodeMs),
      rebuild_session_switch_ratio: median(rebuildMs) / median(rebuildEpisodeMs),
      /** rebuild-session by encoding the graph (θ past 2 GiB, or several switch threads). */
      rebuild_session_encode_switch_ms: median(rebuildEncodeMs),
      rebuild_session_encode_switch_ratio: median(rebuildEncodeMs) / median(rebuildEpisodeMs),
      drift: maxDrift(exactSegs, original),
      drift_plain_subtraction: maxDrift(plainSegs, original),
      drift_bound: 1e-6 * thetaRms,
      drift_cycles: cycles,
      drift_model: driftName,
      input_vs_initializer: Math.min(...inputVsInit.map((r) => r.ratio)),
      input_vs_initializer_batches: inputVsInit,
      targets: { switch_ratio: 0.05, drift: '≤ 1e-6·RMS(θ)', input_vs_initializer: 0.95 },
      machine: machineInfo(),
    };
    if (p.json) io.stdout(JSON.stringify(out, null, 2));
    else {
      io.stdout(`switch_ratio ${switchRatio.toFixed(3)} (switch ${out.switch_ms.toFixed(0)} ms, ${out.switch_cpu_ms.toFixed(0)} ms of CPU, ÷ episode ${out.episode_ms.toFixed(0)} ms; target ≤ 0.05)`);
      io.stdout(`antithetic_switch_ratio ${out.antithetic_switch_ratio.toFixed(3)} (per member of a pair served back to back: ${out.antithetic_switch_ms.toFixed(0)} ms)`);
      io.stdout(`switch_ratio_threaded ${out.switch_ratio_threaded.toFixed(3)} (${switchThreads} threads: ${out.switch_ms_threaded.toFixed(0)} ms, ${out.switch_speedup.toFixed(2)}× faster; antithetic ${out.antithetic_switch_ratio_threaded.toFixed(3)})`);
      io.stdout(`drift ${out.drift} after ${cycles} cycles (bound ${out.drift_bound.toExponential(2)}; plain subtraction ${out.drift_plain_subtraction.toExponential(2)})`);
      io.stdout(`input_vs_initializer ${out.input_vs_initializer.toFixed(3)} (target ≥ 0.95)`);
      io.stdout(
        `rebuild-session switch_ratio ${out.rebuild_session_switch_ratio.toFixed(3)} (θ in an ORT-format model: ${out.rebuild_session_switch_ms.toFixed(0)} ms ÷ episode ${out.rebuild_session_episode_ms.toFixed(0)} ms at initializer speed); ` +
          `by encoding the graph ${out.rebuild_session_encode_switch_ratio.toFixed(3)} (${out.rebuild_session_encode_switch_ms.toFixed(0)} ms)`,
      );
    }
    return 0;
  },
};
