import { listNamedSuites } from '../../../environments/task-suites/suite-catalog.ts';
import { listNamedTaskFolders } from '../../../environments/web/task-folder-catalog.ts';
import { parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { storeFlags, storeFromFlags } from '../argv/store-flags.ts';

export const command: Command = {
  name: 'tasks list',
  usage: 'esopt tasks list [--store DIR | --cloud] [--json]   (--json: { suites, folders })',
  async run(argv, io) {
    const p = parseFlags(argv, storeFlags);
    const chosen = storeFromFlags(p);
    try {
      const [suites, folders] = await Promise.all([listNamedSuites(chosen.store), listNamedTaskFolders(chosen.store)]);
      if (p.json) io.stdout(JSON.stringify({ suites, folders }));
      else {
        const lines = [
          ...suites.map((s) => `${s.name}\tsuite\t${s.environment}\t${s.tasks} tasks\t${s.manifestSha256.slice(0, 12)}\t${s.pushedAt}`),
          ...folders.map((f) => `${f.name}\tfolder\tweb\t${f.tasks} task pages, ${f.files} files\t${f.manifestSha256.slice(0, 12)}\t${f.pushedAt}`),
        ];
        io.stdout(lines.length ? lines.join('\n') : `no task suites or folders in ${chosen.where}`);
      }
      return 0;
    } finally {
      chosen.close();
    }
  },
};
