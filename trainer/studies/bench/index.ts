/**
 * The benchmarks, in the order `bench all` runs them: each a module with its options and a `run` that
 * resolves to the result (`module`), and the CLI command that shows it (`load`); the CLI's registry
 * includes this list, so a benchmark's summary is said here once. Both load lazily.
 */
import type { CommandEntry } from '../../cli/argv/command.ts';
import type { Benchmark } from './benchmark.ts';

export interface BenchmarkEntry extends CommandEntry {
  module: () => Promise<Benchmark>;
}

export const benchmarks: BenchmarkEntry[] = [
  { name: 'bench noise', summary: 'benchmark regenerate-and-apply noise vs numpy and a plain add', module: () => import('./noise.ts'), load: async () => (await import('../../cli/commands/bench/noise.ts')).command },
  { name: 'bench lowrank', summary: 'low-rank mode tokens/s with B members in one batch ÷ unperturbed tokens/s', module: () => import('./lowrank.ts'), load: async () => (await import('../../cli/commands/bench/lowrank.ts')).command },
  { name: 'bench context', summary: 'decode ms per token and prefill tokens/s against the context length (64 … 4,096)', module: () => import('./context.ts'), load: async () => (await import('../../cli/commands/bench/context.ts')).command },
  { name: 'bench full', summary: 'full mode: member switch cost, restore drift, θ-as-inputs ÷ initializers tokens/s', module: () => import('./full.ts'), load: async () => (await import('../../cli/commands/bench/full.ts')).command },
  { name: 'bench lora', summary: 'LoRA-ES beside full mode: member switch ÷ episode, tokens/s ÷ base, peak RSS ÷ inference', module: () => import('./lora.ts'), load: async () => (await import('../../cli/commands/bench/lora.ts')).command },
  { name: 'bench memory', summary: 'peak RSS of training ÷ peak RSS of generating only (child processes)', module: () => import('./memory.ts'), load: async () => (await import('../../cli/commands/bench/memory.ts')).command },
  { name: 'bench prefix', summary: "a 15-turn episode in-process with the prefix cache and without: wall time, tokens prefilled ÷ the episode's", module: () => import('./prefix.ts'), load: async () => (await import('../../cli/commands/bench/prefix.ts')).command },
  { name: 'bench peer', summary: 'tokens/s ÷ transformers.js on the same export and batch, beside the memory-bandwidth limit', module: () => import('./peer.ts'), load: async () => (await import('../../cli/commands/bench/peer.ts')).command },
  { name: 'bench server', summary: 'tokens/s through the HTTP server (32 concurrent chats) ÷ offline batched generation', module: () => import('./server.ts'), load: async () => (await import('../../cli/commands/bench/server.ts')).command },
  { name: 'bench transfer', summary: 'host ↔ device bytes per decode step: measured on webgpu, KV caches on the device and on the host; computed for CUDA', module: () => import('./transfer.ts'), load: async () => (await import('../../cli/commands/bench/transfer.ts')).command },
  { name: 'bench update', summary: "share of an iteration's wall time outside episodes (small model, G = 32)", module: () => import('./update.ts'), load: async () => (await import('../../cli/commands/bench/update.ts')).command },
  { name: 'bench replicas', summary: 'episodes/s with 2 trainer replicas ÷ with 1 at the same episode load, each replica pinned to a core', module: () => import('./replicas.ts'), load: async () => (await import('../../cli/commands/bench/replicas.ts')).command },
  { name: 'bench fanout', summary: 'benchmark local-pool scaling and the trainer overhead of a Lambda iteration', module: () => import('./fanout.ts'), load: async () => (await import('../../cli/commands/bench/fanout.ts')).command },
];
