/**
 * `esopt bench context`: decode milliseconds per token against the context length, and the prefill rate at
 * each length, through the engine's decode loop. Each point times a prompt of L tokens generating one token
 * (the prefill) and generating N; the difference over N − 1 steps is the decode cost at that context, so
 * the prefill never leaks into the per-token figure. Every graph variant is timed at every point in
 * alternating order, so drift in a shared machine's load hits them alike.
 */
import { z } from 'zod';
import { modelSpecFlag } from '../argv/model-flags.ts';
import { contextLength } from '../model/config.ts';
import { openModel } from '../model/open-model.ts';
import { createSession } from '../model/sessions.ts';
import type { Log } from './benchmark.ts';
import { benchDevice, decodeContext } from './decode-context.ts';
import { decodeBatch } from '../generation/decode-loop.ts';
import { machineInfo, median, timeMs } from './measure.ts';
import { int, ModelName, Provider, Repeats, Threads } from './options.ts';
import { benchRows } from './throughput.ts';

export const options = z.object({
  model: ModelName('small'),
  contexts: z
    .string()
    .regex(/^\d+(,\d+)*$/, 'comma-separated context lengths')
    .default('64,128,256,512,1024,2048,4096')
    .transform((s) => s.split(',').map(Number)),
  batch: int(1, 64).default(1),
  newTokens: int(2, 256).default(16),
  repeats: Repeats(3),
  threads: Threads,
  provider: Provider,
});

export async function run(o: z.output<typeof options>, log: Log) {
  const { batch, newTokens, repeats, threads, provider } = o;
  const model = openModel(modelSpecFlag(o.model, 0));
  const maxContext = contextLength(model.config).length;
  const sessionOptions = { executionProvider: provider, threads };
  // The unrewritten graph is the only variant until the in-place (fused attention) rewrite lands; the
  // result lists variants by name so a second one is timed beside it at every point.
  const variants = [{ name: 'unfused', session: await createSession(model.graph, sessionOptions, model.dir) }];
  const ctx = { ...decodeContext(model), device: await benchDevice(model, sessionOptions) };
  // A point's context is its prompt plus the tokens it generates, so the prompt is capped below the model's context.
  const lengths = [...new Set(o.contexts.map((L) => Math.min(L, maxContext)))];

  const points = [];
  for (const L of lengths) {
    const prompt = L - newTokens;
    if (prompt < 1) throw new RangeError(`--contexts ${L}: leaves no prompt before ${newTokens} new tokens`);
    log(`context ${L}: prompt ${prompt} + ${newTokens} new tokens, batch ${batch}, ${repeats} interleaved rounds`);
    const one = benchRows(batch, prompt, 1, ctx.shape.vocabSize);
    const many = benchRows(batch, prompt, newTokens, ctx.shape.vocabSize);
    const prefillMs = variants.map(() => [] as number[]);
    const fullMs = variants.map(() => [] as number[]);
    for (let r = -1; r < repeats; r++) {
      const order = r % 2 === 0 ? variants.map((_, i) => i) : variants.map((_, i) => i).reverse();
      for (const i of order) {
        const dc = { ...ctx, session: variants[i].session, extraFeeds: {} };
        const p = await timeMs(() => decodeBatch(dc, one));
        const f = await timeMs(() => decodeBatch(dc, many));
        // round −1 warms the sessions' allocators for this length and is not kept
        if (r >= 0) {
          prefillMs[i].push(p);
          fullMs[i].push(f);
        }
      }
    }
    const entry = {
      context: L,
      prompt_tokens: prompt,
      variants: variants.map((v, i) => {
        const prefill = median(prefillMs[i]);
        const decodeMsPerToken = Math.max(0, median(fullMs[i]) - prefill) / (newTokens - 1);
        return { name: v.name, decode_ms_per_token: decodeMsPerToken, prefill_tokens_per_s: (batch * prompt) / (prefill / 1000) };
      }),
    };
    for (const v of entry.variants) log(`  ${v.name}: decode ${v.decode_ms_per_token.toFixed(2)} ms/token, prefill ${v.prefill_tokens_per_s.toFixed(0)} tokens/s`);
    points.push(entry);
  }
  await Promise.all([...variants.map((v) => v.session.release()), ctx.device?.release()]);
  return { model: o.model, max_context: maxContext, batch, new_tokens: newTokens, repeats, provider, points, machine: machineInfo() };
}
