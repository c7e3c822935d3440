import { listNamedInstructions } from '../../../shared/instructions-catalog.ts';
import { parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { storeFlags, storeFromFlags } from '../argv/store-flags.ts';

export const command: Command = {
  name: 'instructions list',
  usage: 'esopt instructions list [--store DIR | --cloud] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, storeFlags);
    const chosen = storeFromFlags(p);
    try {
      const all = await listNamedInstructions(chosen.store);
      if (p.json) io.stdout(JSON.stringify(all));
      else io.stdout(all.length ? all.map((r) => `${r.name}\t${r.manifestSha256.slice(0, 12)}\tsystem ${r.systemBytes} bytes\tskills ${r.skills.join(',') || '-'}\t${r.pushedAt}`).join('\n') : `no instructions in ${chosen.where}`);
      return 0;
    } finally {
      chosen.close();
    }
  },
};
