import { listNamedSuites } from '../../../environments/task-suites/suite-catalog.ts';
import { parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { storeFlags, storeFromFlags } from '../argv/store-flags.ts';

export const command: Command = {
  name: 'tasks list',
  usage: 'esopt tasks list [--store DIR | --cloud] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, storeFlags);
    const chosen = storeFromFlags(p);
    try {
      const suites = await listNamedSuites(chosen.store);
      if (p.json) io.stdout(JSON.stringify(suites));
      else io.stdout(suites.length ? suites.map((s) => `${s.name}\t${s.environment}\t${s.tasks} tasks\t${s.manifestSha256.slice(0, 12)}\t${s.pushedAt}`).join('\n') : `no task suites in ${chosen.where}`);
      return 0;
    } finally {
      chosen.close();
    }
  },
};
