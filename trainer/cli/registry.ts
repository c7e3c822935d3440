import type { Command } from './command.ts';

/**
 * Every command, loaded lazily so `esopt --help` does not pay for onnxruntime or Chromium.
 * Add a line here for a new command; its module lives in ./commands/.
 */
export interface Entry {
  name: string;
  summary: string;
  load: () => Promise<Command>;
}

export const registry: Entry[] = [
  { name: 'noise', summary: 'print values of a member\'s seeded Gaussian noise', load: async () => (await import('./commands/noise.ts')).command },
  { name: 'es step', summary: 'one ES update from JSON on stdin, with ε shown', load: async () => (await import('./commands/es-step.ts')).command },
  { name: 'bench noise', summary: 'benchmark regenerate-and-apply noise vs numpy and a plain add', load: async () => (await import('./commands/bench-noise.ts')).command },
  { name: 'episode', summary: 'play one episode of an environment with a scripted or HTTP policy', load: async () => (await import('./commands/episode.ts')).command },
  { name: 'tasks', summary: "sample an environment's tasks from its train or eval split", load: async () => (await import('./commands/tasks.ts')).command },
];
