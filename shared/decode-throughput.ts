/**
 * The trainer's measured decode throughput, the input of the cost model's GPU share: an episode's tokens
 * take `1 / tokensPerSecond` seconds of the box (the server's batched rate, all concurrent streams
 * together). Measurements are recorded by `esopt bench server --record FILE --instance-type T` into
 * configs/decode-throughput.json, one entry per (instance type, provider, model); `gpuSecondsPerToken`
 * picks the entry for the deployed box, else says there is none.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { z } from 'zod';
import { ExecutionProvider } from './execution-provider.ts';

export const ThroughputMeasurement = z.object({
  /** EC2 instance type, or `local-cpu` for a development machine. */
  instanceType: z.string().min(1),
  provider: ExecutionProvider,
  /** The model measured: a preset name or a model directory. */
  model: z.string().min(1),
  concurrency: z.number().int().min(1),
  maxTokens: z.number().int().min(1),
  /** Generated tokens per second through the inference server (median of the repeats). */
  tokensPerSecond: z.number().positive().finite(),
  measuredAt: z.iso.datetime(),
  command: z.string().min(1),
  machine: z.string().min(1),
});
export type ThroughputMeasurement = z.infer<typeof ThroughputMeasurement>;

export const ThroughputRecords = z.array(ThroughputMeasurement);

export function readThroughput(path: string): ThroughputMeasurement[] {
  return ThroughputRecords.parse(JSON.parse(readFileSync(path, 'utf8')));
}

/** Adds or replaces the entry for the same (instance type, provider, model). */
export function recordThroughput(path: string, m: ThroughputMeasurement): ThroughputMeasurement[] {
  let records: ThroughputMeasurement[] = [];
  try {
    records = readThroughput(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const same = (r: ThroughputMeasurement) => r.instanceType === m.instanceType && r.provider === m.provider && r.model === m.model;
  const next = [...records.filter((r) => !same(r)), ThroughputMeasurement.parse(m)];
  writeFileSync(path, `${JSON.stringify(next, null, 2)}\n`);
  return next;
}

/** Seconds of the box per generated token, from the measurement for this instance type (and model, when given). */
export function gpuSecondsPerToken(records: ThroughputMeasurement[], instanceType: string, model?: string): number {
  const match = records.filter((r) => r.instanceType === instanceType && (model === undefined || r.model === model));
  if (!match.length) throw new Error(`no decode throughput recorded for ${instanceType}${model ? ` / ${model}` : ''}: run esopt bench server --record configs/decode-throughput.json --instance-type ${instanceType} on it (recorded: ${records.map((r) => `${r.instanceType}/${r.model}`).join(', ') || 'none'})`);
  return 1 / match[match.length - 1].tokensPerSecond;
}
