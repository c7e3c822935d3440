/**
 * `esopt bench full`'s device-noise part (webgpu only): full mode on the route that keeps θ on the device
 * and makes each member there (engine/members/full-device.ts, run noise 'esopt-device-noise'). A member
 * switch (its weights made by the noise graph, waited for by a 4-byte read-back that follows them in the
 * device's queue) ÷ one base episode of `episodeTokens` tokens (goal ≤ 0.05), and a member's tokens/s per batch.
 * The switch is timed twice in the same rounds: with the targeted pieces made in groups (the engine's default)
 * and with a graph run per piece (deviceGroupElements 1), each with its graph runs and nodes a switch.
 */
import * as ort from 'onnxruntime-node';
import { ask } from '../../../shared/es.ts';
import type { LocalModelSpec } from '../../../shared/schemas/index.ts';
import { openEngineOn } from '../../assembly/engine.ts';
import type { GenerateRow } from '../../engine/engine.ts';
import { openModel } from '../../engine/model/open-model.ts';
import { GraphBuilder } from '../../engine/onnx/graph-builder.ts';
import { DataType, encodeModel } from '../../engine/onnx/proto.ts';
import type { Log } from './benchmark.ts';
import { median, timeMs } from './measure.ts';

export interface DeviceNoiseFull {
  switch_ms: number;
  episode_ms: number;
  episode_tokens: number;
  /** switch_ms ÷ episode_ms: the goal is ≤ 0.05. */
  switch_ratio: number;
  /** Bytes fed from the host per switch (keys and σ), and θ's one upload. */
  switch_host_to_device_bytes: number;
  theta_upload_bytes: number;
  member_tokens_per_s: Array<{ batch: number; tokens_per_s: number }>;
  /** Noise graph runs a switch and the graph nodes they ran (each a kernel dispatch or more). */
  graph_runs_per_switch: number;
  graph_nodes_per_switch: number;
  /** The same switch with a graph run per piece, the route before groups. */
  per_piece: { switch_ms: number; graph_runs_per_switch: number; graph_nodes_per_switch: number };
}

/** ReduceSum of one float32 vector, to the host: run after a switch, it returns once the device has made it. */
function syncGraph() {
  const g = new GraphBuilder();
  g.input('x', DataType.FLOAT, ['n']);
  g.nameOutput(g.op1('ReduceSum', ['x'], { keepdims: 0 }), 'sum');
  g.output('sum', DataType.FLOAT, []);
  return encodeModel(g.model('sync'));
}

function rows(batch: number, promptTokens: number, newTokens: number, member: boolean): GenerateRow[] {
  return Array.from({ length: batch }, (_, b) => ({
    promptIds: Array.from({ length: promptTokens }, (_, j) => (b * 31 + j * 7 + 1) % 256),
    member: member ? { kind: 'member' as const, iteration: 0, index: 0 } : { kind: 'base' as const },
    sampling: { temperature: 0, topP: 1, topK: 0, seed: b },
    maxNewTokens: newTokens,
    stop: [],
    ignoreEos: true,
  }));
}

type Engine = Awaited<ReturnType<typeof openEngineOn>>;

/** A member switch on `engine`'s device route, waited for by `sync`; its graph runs and nodes a switch so far. */
function switcher(engine: Engine, sync: ort.InferenceSession, members: ReturnType<typeof ask>) {
  const serving = engine.deviceMembers;
  if (!serving) throw new Error('the device route was not taken (see the ESOPT_MEMBER_ROUTE warning)');
  return {
    once: (m: number) => serving.withMember(members[m % members.length], async (feeds) => {
      const smallest = Object.values(feeds).reduce((a, t) => (t.dims[0] < a.dims[0] ? t : a));
      await sync.run({ x: smallest });
    }),
    perSwitch: () => {
      const t = engine.switchTransfer!;
      return { graph_runs_per_switch: t.noiseRuns / Math.max(1, t.switches), graph_nodes_per_switch: t.noiseNodes / Math.max(1, t.switches) };
    },
  };
}

export async function measureDeviceNoiseFull(o: { model: LocalModelSpec; batches: number[]; promptTokens: number; newTokens: number; episodeTokens: number; repeats: number; sigma: number; threads?: number }, log: Log): Promise<DeviceNoiseFull> {
  const options = { model: o.model, executionProvider: 'webgpu' as const, mode: 'full' as const, noise: 'esopt-device-noise' as const, prefixCacheBytes: 0, ...(o.threads ? { threads: o.threads } : {}) };
  const engine = await openEngineOn(openModel(o.model), options);
  let perPieceEngine: Engine | null = null;
  const sync = await ort.InferenceSession.create(syncGraph(), { executionProviders: ['webgpu'] });
  try {
    perPieceEngine = await openEngineOn(openModel(o.model), { ...options, deviceGroupElements: 1 });
    const members = ask({ population: 4, antithetic: true });
    const population = { runSeed: 1, iteration: 0, sigma: o.sigma, rank: 1, noise: 'esopt-device-noise' as const, members };
    engine.setPopulation(population);
    perPieceEngine.setPopulation(population);
    log(`device noise: a member switch (weights made on the device, in groups and per piece) vs a ${o.episodeTokens}-token base episode, ${o.repeats} rounds`);
    const grouped = switcher(engine, sync, members);
    const perPiece = switcher(perPieceEngine, sync, members);
    await grouped.once(0); // warm-up: the noise graphs' first runs compile their shaders
    await perPiece.once(0);
    const episode = rows(1, o.promptTokens, o.episodeTokens, false);
    await engine.generate(episode);
    const switchMs: number[] = [];
    const perPieceMs: number[] = [];
    const episodeMs: number[] = [];
    for (let r = 0; r < o.repeats; r++) {
      switchMs.push(await timeMs(() => grouped.once(r + 1)));
      perPieceMs.push(await timeMs(() => perPiece.once(r + 1)));
      episodeMs.push(await timeMs(() => engine.generate(episode)));
    }
    const perPieceResult = { switch_ms: median(perPieceMs), ...perPiece.perSwitch() };
    await perPieceEngine.close();
    perPieceEngine = null;
    log(`  device noise switch: ${median(switchMs).toFixed(1)} ms in groups, ${perPieceResult.switch_ms.toFixed(1)} ms per piece`);
    const memberTokens: DeviceNoiseFull['member_tokens_per_s'] = [];
    for (const batch of o.batches) {
      const batchRows = rows(batch, o.promptTokens, o.newTokens, true);
      const rates: number[] = [];
      for (let r = 0; r < o.repeats; r++) {
        const ms = await timeMs(() => engine.generate(batchRows));
        rates.push((batch * o.newTokens) / (ms / 1000));
      }
      memberTokens.push({ batch, tokens_per_s: median(rates) });
      log(`  device noise, batch ${batch}: ${median(rates).toFixed(1)} member tok/s`);
    }
    const t = engine.switchTransfer!;
    return {
      switch_ms: median(switchMs),
      episode_ms: median(episodeMs),
      episode_tokens: o.episodeTokens,
      switch_ratio: median(switchMs) / median(episodeMs),
      switch_host_to_device_bytes: t.switchHostToDevice / Math.max(1, t.switches),
      theta_upload_bytes: t.thetaBytes / Math.max(1, t.thetaUploads),
      member_tokens_per_s: memberTokens,
      ...grouped.perSwitch(),
      per_piece: perPieceResult,
    };
  } finally {
    await sync.release();
    await perPieceEngine?.close();
    await engine.close();
  }
}
