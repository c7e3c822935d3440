/**
 * `esopt bench peer`: esopt's decode loop against transformers.js (`@huggingface/transformers`, which also
 * runs onnxruntime-node) on the same export, batch, prompts and length, greedy, in interleaved rounds — esopt
 * on the export's own graph (unfused: K/V concatenated each step, as transformers.js runs it) and, where
 * the export's attention is recognised, on the fused graph the engine runs (fused-attention.ts); and
 * beside both the hardware's limit — the bytes a decode step must read (θ's matrices once for the batch,
 * plus the rows' KV caches) ÷ the memory read bandwidth onnxruntime gets on this machine.
 */
import * as ort from 'onnxruntime-node';
import { z } from 'zod';
import { headDim, kvHeads } from '../../engine/model/config.ts';
import { fuseAttention } from '../../engine/model/fused-attention.ts';
import { openModel } from '../../engine/model/open-model.ts';
import { cachedPresetDir } from '../../engine/model/preset-dir.ts';
import { PRESETS, type PresetName } from '../../engine/model/presets.ts';
import { createSession } from '../../engine/model/sessions.ts';
import { DataType, type ModelProto } from '../../engine/onnx/proto.ts';
import type { Log } from './benchmark.ts';
import { decodeContext } from './decode-context.ts';
import { machineInfo, median } from './measure.ts';
import { readBandwidth } from './memory-bandwidth.ts';
import { int, ModelName, Repeats, Threads } from './options.ts';
import { peerLayout } from './peer-layout.ts';
import { benchRows, tokensPerSecond } from './throughput.ts';
import { decodeBatch } from '../../engine/generation/decode-loop.ts';

export const options = z.object({
  model: ModelName('small'),
  batch: int(1, 256).default(8),
  promptTokens: int(1, 4096).default(16),
  newTokens: int(1, 1024).default(32),
  repeats: Repeats(5),
  threads: Threads,
  bandwidthMib: int(64, 4096).default(512),
});

/** Bytes of θ one decode step reads: every tensor of θ but tables only gathered from (embeddings: B rows). */
export function weightBytesPerStep(graph: ModelProto, theta: ReadonlySet<string>): number {
  const consumers = new Map<string, Set<string>>();
  for (const n of graph.graph.node) for (const i of n.input) consumers.set(i, (consumers.get(i) ?? new Set()).add(n.opType));
  let bytes = 0;
  for (const t of graph.graph.initializer) {
    const ops = consumers.get(t.name);
    if (!theta.has(t.name) || !ops || (ops.size === 1 && ops.has('Gather'))) continue;
    const elements = t.dims.reduce((a, d) => a * Number(d), 1);
    bytes += elements * (t.dataType === DataType.FLOAT16 || t.dataType === DataType.BFLOAT16 ? 2 : 4);
  }
  return bytes;
}

export async function run(o: z.output<typeof options>, log: Log) {
  const { batch: B, promptTokens: P, newTokens: N, repeats, threads } = o;
  const dir = o.model in PRESETS ? cachedPresetDir(o.model as PresetName, 0) : o.model;
  const model = openModel({ dir });
  const c = model.config;
  const session = await createSession(model.graph, { executionProvider: 'cpu', threads }, model.dir);
  const fusion = fuseAttention(model.graph, model.config);
  const fusedSession = fusion.fused ? await createSession(fusion.model, { executionProvider: 'cpu', threads }, model.dir) : null;
  const ctx = decodeContext(model);
  const rows = benchRows(B, P, N, c.vocab_size);

  const layout = peerLayout(dir);
  const tjs = await import('@huggingface/transformers');
  tjs.env.allowRemoteModels = false;
  tjs.env.localModelPath = `${layout.root}/`;
  const peer = await tjs.AutoModelForCausalLM.from_pretrained(layout.name, {
    local_files_only: true,
    dtype: 'fp32',
    device: 'cpu',
    use_external_data_format: layout.externalData,
    ...(threads ? { session_options: { intraOpNumThreads: threads } } : {}),
  });
  const inputIds = new tjs.Tensor('int64', BigInt64Array.from(rows.flatMap((r) => r.promptIds.map(BigInt))), [B, P]);
  const attentionMask = new tjs.Tensor('int64', new BigInt64Array(B * P).fill(1n), [B, P]);
  const theirs = async () => {
    const t0 = performance.now();
    const out = (await peer.generate({ input_ids: inputIds, attention_mask: attentionMask, max_new_tokens: N, min_new_tokens: N, do_sample: false })) as { data: BigInt64Array; dims: number[] };
    const ms = performance.now() - t0;
    const width = out.dims[1];
    return { tps: (B * N) / (ms / 1000), tokens: Array.from({ length: B }, (_, b) => Array.from(out.data.slice(b * width + P, b * width + P + N), Number)) };
  };
  const ours = () => tokensPerSecond({ ...ctx, session, extraFeeds: {} }, rows);
  const oursFused = () => (fusedSession ? tokensPerSecond({ ...ctx, session: fusedSession, extraFeeds: {} }, rows) : Promise.resolve(null));

  try {
    log(`${o.model}: B = ${B}, ${P}-token prompts, ${N} new tokens; warm-up, then ${repeats} interleaved rounds`);
    const ourTokens = (await decodeBatch({ ...ctx, session, extraFeeds: {}, eosIds: new Set() }, rows)).map((r) => r.tokenIds);
    const fusedTokens = fusedSession ? (await decodeBatch({ ...ctx, session: fusedSession, extraFeeds: {}, eosIds: new Set() }, rows)).map((r) => r.tokenIds) : null;
    const theirTokens = (await theirs()).tokens;
    await ours();
    await oursFused();
    const oursTps: number[] = [];
    const fusedTps: number[] = [];
    const theirsTps: number[] = [];
    const fusedRound = async () => {
      const tps = await oursFused();
      if (tps !== null) fusedTps.push(tps);
    };
    for (let r = 0; r < repeats; r++) {
      // rotate which goes first so drift in machine load hits each alike
      const order = [async () => oursTps.push(await ours()), async () => theirsTps.push((await theirs()).tps), fusedRound];
      for (let k = 0; k < order.length; k++) await order[(k + r) % order.length]();
    }
    log('memory read bandwidth (ReduceSum over a tensor far larger than the caches)');
    const bandwidth = await readBandwidth({ mebibytes: o.bandwidthMib, repeats: 5, threads });
    const weightBytes = weightBytesPerStep(model.graph, new Set(model.weights.map((w) => w.name)));
    // the rows' keys and values at the decode's mean context, read once a step
    const kvBytes = B * (P + N / 2) * 2 * c.num_hidden_layers * kvHeads(c) * headDim(c) * 4;
    const limit = (B * bandwidth.bytes_per_s) / (weightBytes + kvBytes);
    const esopt = median(oursTps);
    const esoptFused = fusedTps.length > 0 ? median(fusedTps) : null;
    const tjsTps = median(theirsTps);
    const equalRows = (tokens: number[][]) => tokens.filter((t, b) => t.length === theirTokens[b].length && t.every((x, i) => x === theirTokens[b][i])).length;
    const result = {
      model: o.model,
      batch: B,
      prompt_tokens: P,
      new_tokens: N,
      repeats,
      threads: threads ?? null,
      esopt_tokens_per_s: esopt,
      transformers_js_tokens_per_s: tjsTps,
      ratio: esopt / tjsTps,
      /** esopt on the fused graph (null where the attention is not recognised: `fused` says why). */
      esopt_fused_tokens_per_s: esoptFused,
      fused_ratio: esoptFused === null ? null : esoptFused / tjsTps,
      fused: fusion.fused ? true : fusion.reason,
      /** Each round's tokens/s (medians above). */
      rounds: { esopt: oursTps, esopt_fused: fusedTps, transformers_js: theirsTps },
      rows_with_equal_tokens: equalRows(ourTokens),
      fused_rows_with_equal_tokens: fusedTokens ? equalRows(fusedTokens) : null,
      // esopt samples only the tokenizer's rows (padding rows past it never); transformers.js takes the argmax over all
      sampled_vocabulary: ctx.shape.sampleable,
      vocabulary: c.vocab_size,
      transformers_js_tokens_outside_sampled_vocabulary: theirTokens.flat().filter((t) => t >= ctx.shape.sampleable).length,
      transformers_js: tjs.env.version,
      onnxruntime_node: ort.env.versions.node ?? ort.env.versions.common,
      read_bandwidth_bytes_per_s: bandwidth.bytes_per_s,
      weight_bytes_per_step: weightBytes,
      kv_bytes_per_step: kvBytes,
      limit_tokens_per_s: limit,
      esopt_share_of_limit: esopt / limit,
      machine: machineInfo(),
    };
    if (esoptFused !== null) log(`  esopt fused ${esoptFused.toFixed(1)} tok/s, ratio ${(esoptFused / tjsTps).toFixed(3)}`);
    log(`  esopt ${esopt.toFixed(1)} tok/s, transformers.js ${tjsTps.toFixed(1)} tok/s, ratio ${result.ratio.toFixed(3)}; limit ${limit.toFixed(0)} tok/s at ${(bandwidth.bytes_per_s / 1e9).toFixed(1)} GB/s`);
    return result;
  } finally {
    await session.release();
    await fusedSession?.release();
    await peer.dispose();
    layout.remove();
  }
}
