import { z } from 'zod';
import { recordThroughput } from '../../shared/decode-throughput.ts';
import type { ChatMessage } from '../../shared/ports/policy.ts';
import { machineInfo, median } from './measure.ts';
import type { Engine, GenerateRow } from '../engine.ts';
import { createEngine } from '../model/create-engine.ts';
import { ChatCompletion } from '../server/openai-schema.ts';
import { startInferenceServer } from '../server/server.ts';
import { flag, parseFlags } from '../command/args.ts';
import type { Command } from '../command/command.ts';
import { modelSpecFlag } from '../command/model-flags.ts';

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

export const command: Command = {
  name: 'bench server',
  usage: 'esopt bench server [--model tiny|small|DIR] [--concurrency 32] [--max-tokens 32] [--repeats 3] [--window-ms 20] [--max-wait-ms 200] [--provider cpu|cuda] [--record FILE --instance-type T] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, {
      model: { type: 'string', default: 'small' },
      concurrency: { type: 'string', default: '32' },
      'max-tokens': { type: 'string', default: '32' },
      repeats: { type: 'string', default: '3' },
      provider: { type: 'string', default: 'cpu' },
      'window-ms': { type: 'string', default: '20' },
      'max-wait-ms': { type: 'string', default: '200' },
      record: { type: 'string' },
      'instance-type': { type: 'string' },
    });
    // --record FILE: the server's rate goes into the cost model's measurements (shared/decode-throughput.ts).
    const record = p.values.record === undefined ? undefined : flag(p.values, 'record', z.string().min(1));
    const instanceType = record === undefined ? undefined : flag(p.values, 'instance-type', z.string().regex(/^([a-z0-9]+\.[a-z0-9]+|local-cpu)$/, 'an EC2 instance type such as g5.xlarge, or local-cpu'));
    const model = modelSpecFlag(flag(p.values, 'model', z.string().min(1)), 0);
    const n = flag(p.values, 'concurrency', z.coerce.number().int().min(1).max(1024));
    const maxTokens = flag(p.values, 'max-tokens', z.coerce.number().int().min(1).max(4096));
    const repeats = flag(p.values, 'repeats', z.coerce.number().int().min(1).max(50));
    const provider = flag(p.values, 'provider', z.enum(['cpu', 'cuda']));
    // The server's batching window: N clients' requests must land in one batch to be compared with batch N.
    const windowMs = flag(p.values, 'window-ms', z.coerce.number().min(0).max(10_000));
    const maxWaitMs = flag(p.values, 'max-wait-ms', z.coerce.number().min(0).max(10_000));
    const log = (m: string) => {
      if (!p.json) io.stderr(m);
    };
    const engine = await createEngine({ model, mode: 'full', executionProvider: provider, maxBatch: n });
    const server = await startInferenceServer(engine, { batching: { windowMs, maxWaitMs, maxBatch: n, maxQueue: 4 * n } });
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
        target: '>= 0.8',
        machine: machineInfo(),
      };
      if (record !== undefined && instanceType !== undefined) {
        recordThroughput(record, {
          instanceType,
          provider,
          model: String(p.values.model),
          concurrency: n,
          maxTokens,
          tokensPerSecond: serverTps,
          measuredAt: new Date().toISOString(),
          command: `esopt bench server ${argv.join(' ')}`,
          machine: JSON.stringify(result.machine),
        });
        log(`recorded ${serverTps.toFixed(1)} tok/s for ${instanceType} in ${record}`);
      }
      io.stdout(p.json ? JSON.stringify(result) : `server ${serverTps.toFixed(1)} tok/s ÷ offline ${offlineTps.toFixed(1)} tok/s = ratio ${result.ratio.toFixed(3)} (target ≥ 0.8; ${n} concurrent, ${maxTokens} tokens each)`);
      return 0;
    } finally {
      await server.close();
      await engine.close();
    }
  },
};
