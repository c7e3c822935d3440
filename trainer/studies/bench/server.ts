/** `esopt bench server`: tokens/s through the HTTP server with N concurrent chats ÷ offline batched generation at batch N. */
import { z } from 'zod';
import { recordThroughput } from '../../../shared/decode-throughput.ts';
import type { ChatMessage } from '../../../shared/ports/policy.ts';
import { modelSpecFlag } from '../../engine/model/presets.ts';
import type { Engine, GenerateRow } from '../../engine/engine.ts';
import { openEngine, serveEngine } from '../../assembly/engine.ts';
import { ChatCompletion } from '../../serving/openai-schema.ts';
import type { Log } from './benchmark.ts';
import { machineInfo, median } from './measure.ts';
import { int, ModelName, Provider, Repeats } from './options.ts';

const messages: ChatMessage[] = [
  { role: 'system', content: 'You play sudoku. Answer with one move: place <row> <col> <digit>.' },
  { role: 'user', content: 'Board:\n1 . 3 4\n3 4 . 2\n. 1 4 3\n4 3 2 .\nYour move?' },
];

/** Completion tokens per second of one offline `engine.generate` call over `n` rows. */
async function offline(engine: Engine, n: number, maxTokens: number): Promise<number> {
  const rows: GenerateRow[] = Array.from({ length: n }, (_, i) => ({
    messages,
    member: { kind: 'base' },
    sampling: { temperature: 1, topP: 1, topK: 0, seed: i },
    maxNewTokens: maxTokens,
    stop: [],
  }));
  const t0 = performance.now();
  const out = await engine.generate(rows);
  return out.reduce((a, r) => a + r.completionTokens, 0) / ((performance.now() - t0) / 1000);
}

/** Completion tokens per second of `n` concurrent chat requests through the HTTP server. */
async function throughServer(url: string, n: number, maxTokens: number): Promise<number> {
  const t0 = performance.now();
  const bodies = await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const res = await fetch(`${url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'base', messages, temperature: 1, seed: i, max_tokens: maxTokens }),
      });
      if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
      return ChatCompletion.parse(await res.json());
    }),
  );
  return bodies.reduce((a, b) => a + b.usage.completion_tokens, 0) / ((performance.now() - t0) / 1000);
}

export const options = z
  .object({
    model: ModelName('small'),
    concurrency: int(1, 1024).default(32),
    maxTokens: int(1, 4096).default(32),
    repeats: Repeats(3),
    provider: Provider,
    // The server's batching window: N clients' requests must land in one batch to be compared with batch N.
    windowMs: z.coerce.number().min(0).max(10_000).default(20),
    maxWaitMs: z.coerce.number().min(0).max(10_000).default(200),
    // The server's rate goes into the cost model's measurements (shared/decode-throughput.ts).
    record: z.string().min(1).optional(),
    instanceType: z.string().regex(/^([a-z0-9]+\.[a-z0-9]+|local-cpu)$/, 'an EC2 instance type such as g5.xlarge, or local-cpu').optional(),
  })
  .refine((o) => o.record === undefined || o.instanceType !== undefined, { message: 'required with --record', path: ['instanceType'] });

export async function run(o: z.output<typeof options>, log: Log) {
  const { concurrency: n, maxTokens, repeats, provider, windowMs, maxWaitMs } = o;
  const model = modelSpecFlag(o.model, 0);
  const engine = await openEngine({ model, mode: 'full', executionProvider: provider, maxBatch: n });
  const server = await serveEngine(engine, { batching: { windowMs, maxWaitMs, maxBatch: n, maxQueue: 4 * n } });
  try {
    // Warm-up of both paths (session first-run costs), not measured.
    await offline(engine, n, 4);
    await throughServer(server.url, n, 4);
    const batchesBefore = server.service.metrics.batches;
    const off: number[] = [];
    const http: number[] = [];
    for (let r = 0; r < repeats; r++) {
      // Interleaved, alternating which side goes first, so drift in machine load hits both alike.
      if (r % 2 === 0) {
        off.push(await offline(engine, n, maxTokens));
        http.push(await throughServer(server.url, n, maxTokens));
      } else {
        http.push(await throughServer(server.url, n, maxTokens));
        off.push(await offline(engine, n, maxTokens));
      }
      log(`repeat ${r + 1}/${repeats}: offline ${off[r].toFixed(1)} tok/s, server ${http[r].toFixed(1)} tok/s`);
    }
    // How many engine calls the server needed per round of N requests (1 = the whole burst in one batch).
    const serverBatchesPerRound = (server.service.metrics.batches - batchesBefore) / repeats;
    const offlineTps = median(off);
    const serverTps = median(http);
    const result = {
      bench: 'server',
      model,
      provider,
      concurrency: n,
      maxTokens,
      repeats,
      batching: { windowMs, maxWaitMs },
      offline_tokens_per_s: offlineTps,
      server_tokens_per_s: serverTps,
      server_batches_per_round: serverBatchesPerRound,
      ratio: serverTps / offlineTps,
      goal: '>= 0.8',
      machine: machineInfo(),
    };
    if (o.record !== undefined && o.instanceType !== undefined) {
      recordThroughput(o.record, {
        instanceType: o.instanceType,
        provider,
        model: o.model,
        concurrency: n,
        maxTokens,
        tokensPerSecond: serverTps,
        measuredAt: new Date().toISOString(),
        command: `esopt bench server --model ${o.model} --concurrency ${n} --max-tokens ${maxTokens} --repeats ${repeats} --window-ms ${windowMs} --max-wait-ms ${maxWaitMs} --provider ${provider} --record ${o.record} --instance-type ${o.instanceType}`,
        machine: JSON.stringify(result.machine),
      });
      log(`recorded ${serverTps.toFixed(1)} tok/s for ${o.instanceType} in ${o.record}`);
    }
    return result;
  } finally {
    await server.close();
    await engine.close();
  }
}
