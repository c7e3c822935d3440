/**
 * `esopt bench context`: decode milliseconds per token against the context length, and the prefill rate at
 * each length, through the engine's decode loop, for the unfused graph (KV caches concatenated each step)
 * and the fused one (caches that grow in place, trainer/engine/model/fused-attention.ts). Each point decodes N
 * tokens after a prompt of L − N: the prefill is the time to the second run (step-times.ts), a decode token
 * the median of the later steps, so the prefill never leaks into the per-token figure. Both variants are
 * timed at every point in alternating order, so drift in a shared machine's load hits them alike, and
 * their greedy tokens are compared.
 */
import { z } from 'zod';
import { modelSpecFlag } from '../../engine/model/presets.ts';
import { contextLength } from '../../engine/model/config.ts';
import { openModel } from '../../engine/model/open-model.ts';
import { createSession } from '../../engine/model/sessions.ts';
import type { Log } from './benchmark.ts';
import { benchDevice, decodeContext } from './decode-context.ts';
import { decodeBatch } from '../../engine/generation/decode-loop.ts';
import { machineInfo, median } from './measure.ts';
import { stepTimes } from './step-times.ts';
import { fuseAttention } from '../../engine/model/fused-attention.ts';
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
  newTokens: int(3, 256).default(16),
  repeats: Repeats(3),
  /** Untimed rounds first at each point (each variant's allocators sized for that length). */
  warmup: int(0, 5).default(1),
  threads: Threads,
  provider: Provider,
});

export async function run(o: z.output<typeof options>, log: Log) {
  const { batch, newTokens, repeats, warmup, threads, provider } = o;
  const model = openModel(modelSpecFlag(o.model, 0));
  const maxContext = contextLength(model.config).length;
  const sessionOptions = { executionProvider: provider, threads };
  const fused = fuseAttention(model.graph, model.config);
  if (!fused.fused) throw new Error(`${model.dir}: the in-place (fused) graph cannot be built: ${fused.reason}`);
  const variants = [
    { name: 'unfused', timer: stepTimes(await createSession(model.graph, sessionOptions, model.dir)) },
    { name: 'fused', timer: stepTimes(await createSession(fused.model, sessionOptions, model.dir)) },
  ];
  const ctx = { ...decodeContext(model), device: await benchDevice(model, sessionOptions) };
  // A point's context is its prompt plus the tokens it generates, so the prompt is capped below the model's context.
  const lengths = [...new Set(o.contexts.map((L) => Math.min(L, maxContext)))];

  const points = [];
  for (const L of lengths) {
    const prompt = L - newTokens;
    if (prompt < 1) throw new RangeError(`--contexts ${L}: leaves no prompt before ${newTokens} new tokens`);
    log(`context ${L}: prompt ${prompt} + ${newTokens} new tokens, batch ${batch}, ${warmup} untimed and ${repeats} timed interleaved rounds`);
    const rows = benchRows(batch, prompt, newTokens, ctx.shape.vocabSize);
    const prefillMs = variants.map(() => [] as number[]);
    const stepMs = variants.map(() => [] as number[]);
    const tokens = variants.map(() => '');
    for (let r = -warmup; r < repeats; r++) {
      const order = r % 2 === 0 ? variants.map((_, i) => i) : variants.map((_, i) => i).reverse();
      for (const i of order) {
        const { timer } = variants[i];
        timer.start();
        const results = await decodeBatch({ ...ctx, session: timer.session, extraFeeds: {} }, rows);
        tokens[i] = JSON.stringify(results.map((x) => x.tokenIds));
        if (r >= 0) {
          prefillMs[i].push(timer.prefillMs());
          stepMs[i].push(...timer.stepMs());
        }
      }
    }
    const entry = {
      context: L,
      prompt_tokens: prompt,
      tokens_equal: tokens.every((t) => t === tokens[0]),
      variants: variants.map((v, i) => ({ name: v.name, decode_ms_per_token: median(stepMs[i]), prefill_tokens_per_s: (batch * prompt) / (median(prefillMs[i]) / 1000) })),
    };
    if (!entry.tokens_equal) log(`  the variants' greedy tokens differ at context ${L}`);
    for (const v of entry.variants) log(`  ${v.name}: decode ${v.decode_ms_per_token.toFixed(2)} ms/token, prefill ${v.prefill_tokens_per_s.toFixed(0)} tokens/s`);
    points.push(entry);
  }
  await Promise.all([...variants.map((v) => v.timer.session.release()), ctx.device?.release()]);
  return { model: o.model, max_context: maxContext, batch, new_tokens: newTokens, repeats, warmup, provider, points, machine: machineInfo() };
}
