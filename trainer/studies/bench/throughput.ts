/**
 * Decode throughput for the benchmark commands: rows with fixed-length prompts that always generate
 * exactly `newTokens` (no end-of-sequence), through the same decode loop the engine serves with.
 */
import type { DecodeContext, PreparedRow } from '../../engine/generation/decode-loop.ts';
import { decodeBatch } from '../../engine/generation/decode-loop.ts';

export function benchRows(batch: number, promptTokens: number, newTokens: number, vocab: number): PreparedRow[] {
  return Array.from({ length: batch }, (_, b) => ({
    promptIds: Array.from({ length: promptTokens }, (_, j) => (b * 31 + j * 7 + 1) % Math.min(vocab, 256)),
    sampling: { temperature: 0, topP: 1, topK: 0, seed: b },
    maxNewTokens: newTokens,
    stop: [],
  }));
}

/** Generated tokens per second (prefill included, as a client sees it). */
export async function tokensPerSecond(ctx: DecodeContext, rows: PreparedRow[]): Promise<number> {
  const t0 = performance.now();
  const results = await decodeBatch({ ...ctx, eosIds: new Set() }, rows);
  const ms = performance.now() - t0;
  return results.reduce((a, r) => a + r.completionTokens, 0) / (ms / 1000);
}
