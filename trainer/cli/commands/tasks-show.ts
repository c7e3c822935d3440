import { readNamedSuite } from '../../../environments/task-suites/suite-catalog.ts';
import { readNamedTaskFolder, readTaskFolderManifest } from '../../../environments/web/task-folder-catalog.ts';
import { TaskSuiteName } from '../../../shared/schemas/index.ts';
import { parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { storeFlags, storeFromFlags } from '../argv/store-flags.ts';
import { UsageError } from '../argv/usage-error.ts';

export const command: Command = {
  name: 'tasks show',
  usage: 'esopt tasks show NAME [--store DIR | --cloud] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, storeFlags, true);
    if (p.positionals.length !== 1) throw new UsageError('give exactly one task suite or folder name');
    const name = TaskSuiteName.safeParse(p.positionals[0]);
    if (!name.success) throw new UsageError(`not a valid task suite name: ${JSON.stringify(p.positionals[0])} (${name.error.issues[0]?.message})`);
    const chosen = storeFromFlags(p);
    try {
      const s = await readNamedSuite(chosen.store, name.data);
      if (!s) {
        const f = await readNamedTaskFolder(chosen.store, name.data);
        if (!f) throw new Error(`no task suite or folder named ${name.data} in ${chosen.where} (esopt tasks list shows those there are)`);
        const manifest = await readTaskFolderManifest(chosen.store, f.manifestSha256);
        const tasks = manifest?.tasks ?? [];
        if (p.json) io.stdout(JSON.stringify({ ...f, kind: 'folder', taskNames: tasks, store: chosen.where }));
        else io.stdout([`task folder ${f.name} (web, miniwob.folder) in ${chosen.where}: ${f.tasks} task pages, ${f.files} files, ${f.bytes} bytes; pushed ${f.pushedAt}`, `manifest ${f.manifestSha256}`, `tasks ${tasks.join(' ')}`].join('\n'));
        return 0;
      }
      if (p.json) io.stdout(JSON.stringify({ ...s, store: chosen.where }));
      else io.stdout([`task suite ${s.name} (${s.environment}) in ${chosen.where}: ${s.tasks} tasks — train ${s.splits.train}, eval ${s.splits.eval}, validation ${s.splits.validation}; pushed ${s.pushedAt}`, `manifest ${s.manifestSha256}`].join('\n'));
      return 0;
    } finally {
      chosen.close();
    }
  },
};
