/**
 * The benchmarks, in the order `bench all` runs them: each a module with its options and a `run` that
 * resolves to the result, loaded lazily. A benchmark's summary is said here once; the CLI's commands for
 * them (trainer/cli/commands/bench/index.ts) take it from this list.
 */
import type { Benchmark } from './benchmark.ts';

export interface BenchmarkEntry {
  /** The command's words: `bench noise`. */
  name: string;
  summary: string;
  module: () => Promise<Benchmark>;
}

export const benchmarks: BenchmarkEntry[] = [
  { name: 'bench noise', summary: 'benchmark regenerate-and-apply noise vs numpy and a plain add', module: () => import('./noise.ts') },
  { name: 'bench lowrank', summary: 'low-rank mode tokens/s with B members in one batch ÷ unperturbed tokens/s', module: () => import('./lowrank.ts') },
  { name: 'bench context', summary: 'decode ms per token and prefill tokens/s against the context length (64 … 4,096)', module: () => import('./context.ts') },
  { name: 'bench full', summary: 'full mode: member switch cost, restore drift, θ-as-inputs ÷ initializers tokens/s', module: () => import('./full.ts') },
  { name: 'bench lora', summary: 'LoRA-ES beside full mode: member switch ÷ episode, tokens/s ÷ base, peak RSS ÷ inference', module: () => import('./lora.ts') },
  { name: 'bench memory', summary: 'peak RSS of training ÷ peak RSS of generating only (child processes)', module: () => import('./memory.ts') },
  { name: 'bench prefix', summary: "a 15-turn episode in-process with the prefix cache and without: wall time, tokens prefilled ÷ the episode's", module: () => import('./prefix.ts') },
  { name: 'bench peer', summary: 'tokens/s ÷ transformers.js on the same export and batch, beside the memory-bandwidth limit', module: () => import('./peer.ts') },
  { name: 'bench server', summary: 'tokens/s through the HTTP server (32 concurrent chats) ÷ offline batched generation', module: () => import('./server.ts') },
  { name: 'bench transfer', summary: 'host ↔ device bytes per decode step: measured on webgpu, KV caches on the device and on the host; computed for CUDA', module: () => import('./transfer.ts') },
  { name: 'bench update', summary: "share of an iteration's wall time outside episodes (small model, G = 32)", module: () => import('./update.ts') },
  { name: 'bench replicas', summary: 'episodes/s with 2 trainer replicas ÷ with 1 at the same episode load, each replica pinned to a core', module: () => import('./replicas.ts') },
  { name: 'bench fanout', summary: 'benchmark local-pool scaling and the trainer overhead of a Lambda iteration', module: () => import('./fanout.ts') },
];
