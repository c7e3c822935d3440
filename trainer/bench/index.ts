/**
 * The benchmarks, each a command whose figures are ratios measured side by side in one run (`--json` for
 * the raw numbers). `esopt bench all` runs this list; the CLI's registry includes it.
 */
import type { CommandEntry } from '../command/command.ts';

export const benchmarks: CommandEntry[] = [
  { name: 'bench noise', summary: 'benchmark regenerate-and-apply noise vs numpy and a plain add', load: async () => (await import('./noise-command.ts')).command },
  { name: 'bench lowrank', summary: 'low-rank mode tokens/s with B members in one batch ÷ unperturbed tokens/s', load: async () => (await import('./lowrank-command.ts')).command },
  { name: 'bench full', summary: 'full mode: member switch cost, restore drift, θ-as-inputs ÷ initializers tokens/s', load: async () => (await import('./full-command.ts')).command },
  { name: 'bench memory', summary: 'peak RSS of training ÷ peak RSS of generating only (child processes)', load: async () => (await import('./memory-command.ts')).command },
  { name: 'bench server', summary: 'tokens/s through the HTTP server (32 concurrent chats) ÷ offline batched generation', load: async () => (await import('./server-command.ts')).command },
  { name: 'bench update', summary: "share of an iteration's wall time outside episodes (small model, G = 32)", load: async () => (await import('./update-command.ts')).command },
  { name: 'bench replicas', summary: 'episodes/s with 2 trainer replicas ÷ with 1 at the same episode load, each replica pinned to a core', load: async () => (await import('./replicas-command.ts')).command },
  { name: 'bench fanout', summary: 'benchmark local-pool scaling and the trainer overhead of a Lambda iteration', load: async () => (await import('./fanout-command.ts')).command },
];
