/**
 * The CLI command of each benchmark in trainer/studies/bench/index.ts, in its order and with its summary,
 * for the registry (../../registry.ts); each command's module loads only when it runs.
 */
import { benchmarks } from '../../../studies/bench/index.ts';
import type { Command, CommandEntry } from '../../argv/command.ts';

const commands: Record<string, () => Promise<{ command: Command }>> = {
  'bench noise': () => import('./noise.ts'),
  'bench lowrank': () => import('./lowrank.ts'),
  'bench context': () => import('./context.ts'),
  'bench full': () => import('./full.ts'),
  'bench lora': () => import('./lora.ts'),
  'bench memory': () => import('./memory.ts'),
  'bench prefix': () => import('./prefix.ts'),
  'bench peer': () => import('./peer.ts'),
  'bench server': () => import('./server.ts'),
  'bench transfer': () => import('./transfer.ts'),
  'bench update': () => import('./update.ts'),
  'bench replicas': () => import('./replicas.ts'),
  'bench fanout': () => import('./fanout.ts'),
};

export const benchCommands: CommandEntry[] = benchmarks.map(({ name, summary }) => {
  const commandModule = commands[name];
  if (!commandModule) throw new Error(`${name} has no command in trainer/cli/commands/bench/`);
  return { name, summary, load: async () => (await commandModule()).command };
});
