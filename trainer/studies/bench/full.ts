/**
 * `esopt bench full`: full mode's costs side by side — a member switch (exact perturb + restore of all θ,
 * on one thread and lent to worker threads) ÷ one episode of generation, the rebuild-session alternative,
 * the drift after many perturb/restore cycles, and θ-as-inputs ÷ θ-as-initializers tokens/s; on webgpu
 * also the route that keeps θ on the device with the run noise esopt-device-noise (full-device-noise.ts).
 */
import { availableParallelism } from 'node:os';
import * as ort from 'onnxruntime-node';
import { z } from 'zod';
import { layoutSegments, perturbDense } from '../../../shared/es.ts';
import type { ParameterSegment } from '../../../shared/es.ts';
import { modelSpecFlag } from '../../engine/model/presets.ts';
import { openModel } from '../../engine/model/open-model.ts';
import { createOrtFormatSession, ORT_FORMAT_LIMIT, ortFormatModel, ortFormatRuns } from '../../engine/model/ort-format.ts';
import { createSession, INLINE_SESSION_LIMIT, sessionOptionsFor } from '../../engine/model/sessions.ts';
import { parameterCount } from '../../engine/model/weights.ts';
import { perturb, restore, switchPerturbation } from '../../engine/perturbation/exact-perturbation.ts';
import { PerturbationPool } from '../../engine/perturbation/perturbation-pool.ts';
import { weightsAsInputs } from '../../engine/perturbation/weights-as-inputs.ts';
import type { Log } from './benchmark.ts';
import { benchDevice, decodeContext } from './decode-context.ts';
import { machineInfo, median, timeMs } from './measure.ts';
import { BatchList, int, ModelName, Provider, Repeats, Threads } from './options.ts';
import { benchRows, tokensPerSecond } from './throughput.ts';
import { measureDeviceNoiseFull } from './full-device-noise.ts';

export const options = z
  .object({
    model: ModelName('small'),
    batches: BatchList('1,8'),
    episodeTokens: int(1, 4096).default(256),
    promptTokens: int(1, 1024).default(64),
    // new tokens a row in the θ-as-inputs vs θ-as-initializers rounds
    newTokens: int(1, 4096).default(64),
    sigma: z.coerce.number().positive().max(1).default(0.001),
    cycles: int(1, 100_000).default(1000),
    driftModel: ModelName('tiny'),
    repeats: Repeats(3),
    threads: Threads,
    switchThreads: int(1, 256).default(availableParallelism),
    provider: Provider,
  });

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

export async function run(o: z.output<typeof options>, log: Log) {
  const { batches, driftModel: driftName, episodeTokens, promptTokens, newTokens, sigma, cycles, repeats, threads, switchThreads, provider } = o;
  const model = openModel(modelSpecFlag(o.model, 0));
  const c = model.config;
  const opts = { executionProvider: provider, threads };
  const ctx = { ...decodeContext(model), device: await benchDevice(model, opts) };
  const segments = layoutSegments(model.weights);
  const weightFeeds = Object.fromEntries(model.weights.map((w) => [w.name, new ort.Tensor('float32', w.data, w.dims)]));
  const withInitializers = await createSession(model.graph, opts, model.dir);
  const withInputs = await createSession(weightsAsInputs(model.graph, model.weights), opts, `${model.dir} (θ as inputs)`);

  // --- θ as graph inputs vs θ as initializers, same graph otherwise ---
  const inputVsInit = [];
  for (const B of batches) {
    const rows = benchRows(B, promptTokens, newTokens, c.vocab_size);
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
  // onnxruntime's own copy of θ goes before the pool's copy comes (a real-shape θ is 2.4 GB a copy)
  await withInitializers.release();

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
  // Where the KV caches stay on a WebGPU device, the decode loop uploads θ once a batch: that upload is the
  // member switch's device part (inside episode_ms above), timed here alone, with a decode-free session run.
  const uploadMs: number[] = [];
  const device = ctx.device;
  if (device) {
    for (let r = 0; r < repeats; r++) uploadMs.push(await timeMs(async () => device.dispose(Object.values(await device.upload(weightFeeds)))));
  }
  const thetaUploadMs = device ? median(uploadMs) : null;
  // The alternative design, rebuild-session: an initializer session made for each member from the
  // perturbed θ. Two ways, as the engine has them: θ inside an ORT-format model, a session made from its
  // bytes (ort-format.ts; one switch thread, θ under 2 GiB), and encoding the graph whose initializer
  // bytes are views onto θ (otherwise). The ORT-format model holds its own copy of θ here.
  const thetaBytes = model.weights.reduce((a, w) => a + w.data.byteLength, 0);
  const ortModel = thetaBytes <= ORT_FORMAT_LIMIT && ortFormatRuns(provider) ? await ortFormatModel(model.graph, model.weights, sessionOptionsFor(opts), model.dir, INLINE_SESSION_LIMIT) : null;
  const rebuildMs: number[] = [];
  if (ortModel) {
    const ortSegments = layoutSegments(model.weights.map((w, i) => ({ name: w.name, data: ortModel.views[i] })));
    for (let r = 0; r < repeats; r++) {
      rebuildMs.push(await timeMs(async () => {
        const pert = perturb(ortSegments, key(r), sigma);
        const s = await createOrtFormatSession(ortModel, sessionOptionsFor(opts), `${model.dir} (member session)`);
        restore(ortSegments, pert);
        await s.release();
      }));
    }
  } else if (!ortFormatRuns(provider)) log(`rebuild-session: the ${provider} provider cannot run an ORT-format model's session: the encode path only`);
  else log(`rebuild-session: θ is ${thetaBytes} bytes, past an ORT-format model (${ORT_FORMAT_LIMIT}): the encode path only`);
  const rebuildEncodeMs: number[] = [];
  for (let r = 0; r < Math.min(repeats, 2); r++) {
    rebuildEncodeMs.push(await timeMs(async () => {
      const pert = perturb(segments, key(r), sigma);
      const s = await createSession(model.graph, opts, `${model.dir} (member session)`);
      restore(segments, pert);
      await s.release();
    }));
  }
  // A rebuilt session generates at initializer speed: timed here on one made from the ORT-format bytes
  // (the encoded graph's where θ is past an ORT-format model).
  const rebuiltSession = ortModel ? await createOrtFormatSession(ortModel, sessionOptionsFor(opts), `${model.dir} (member session)`) : await createSession(model.graph, opts, `${model.dir} (member session)`);
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

  await withInputs.release();
  await ctx.device?.release();
  // webgpu: the same switch on the route that keeps θ on the device (run noise esopt-device-noise)
  const deviceNoise = provider === 'webgpu' ? await measureDeviceNoiseFull({ model: modelSpecFlag(o.model, 0), batches, promptTokens, newTokens, episodeTokens, repeats, sigma, threads }, log) : null;
  const switchRatio = median(oneThreadMs) / median(episodeMs);
  return {
    model: o.model,
    parameters: parameterCount(model.weights),
    provider,
    sigma,
    // One thread: the engine's default switch for θ of this size (create-engine.ts).
    switch_ms: median(oneThreadMs),
    switch_cpu_ms: median(oneThreadCpuMs),
    episode_ms: median(episodeMs),
    episode_tokens: episodeTokens,
    /** The device route: one upload of θ as inputs (once a batch), part of episode_ms; null on the host route. */
    theta_upload_ms: thetaUploadMs,
    /** The device route's member switch: the host's perturb + restore and θ's upload, ÷ the episode without that upload. */
    switch_with_upload_ratio: thetaUploadMs === null ? null : (median(oneThreadMs) + thetaUploadMs) / (median(episodeMs) - thetaUploadMs),
    new_tokens: newTokens,
    switch_ratio: switchRatio,
    /** webgpu only: θ kept on the device, each member made there (engine/members/full-device.ts); null elsewhere. */
    device_noise: deviceNoise,
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
    rebuild_session_switch_ms: ortModel ? median(rebuildMs) : null,
    rebuild_session_episode_ms: median(rebuildEpisodeMs),
    rebuild_session_switch_ratio: ortModel ? median(rebuildMs) / median(rebuildEpisodeMs) : null,
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
}
