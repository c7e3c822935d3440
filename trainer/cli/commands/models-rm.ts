import { z } from 'zod';
import { flag, parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { storeFlags, storeFromFlags } from '../argv/store-flags.ts';
import { DEFAULT_PRUNE_GRACE_MS, removeModel } from '../../training/model-store/remove-model.ts';
import { nameArgument } from '../argv/model-name-argument.ts';

export const command: Command = {
  name: 'models rm',
  usage:
    `esopt models rm NAME [--prune [--grace-hours H]] [--store DIR | --cloud] [--json]\n` +
    '  removes the name; its files stay (other names and runs pinned to it use them) unless --prune, which deletes\n' +
    '  every stored file and manifest that no remaining name uses, no run or evaluation pins (ran, running or\n' +
    `  queued) and no push under way names, once older than --grace-hours (default ${DEFAULT_PRUNE_GRACE_MS / 3_600_000})`,
  async run(argv, io) {
    const p = parseFlags(argv, { ...storeFlags, prune: { type: 'boolean' }, 'grace-hours': { type: 'string' } }, true);
    const name = nameArgument(p.positionals);
    const graceHours = flag(p.values, 'grace-hours', z.coerce.number().min(0).finite().optional());
    const chosen = storeFromFlags(p);
    try {
      const result = await removeModel(chosen.store, name, { prune: p.values.prune === true, ...(graceHours !== undefined ? { graceMs: graceHours * 3_600_000 } : {}) });
      if (!result.removed && !p.values.prune) throw new Error(`no model named ${name} in ${chosen.where}`);
      if (p.json) io.stdout(JSON.stringify({ ...result, store: chosen.where }));
      else {
        io.stdout(
          [
            result.removed ? `removed ${name} from ${chosen.where}` : `no model named ${name} in ${chosen.where}`,
            ...(p.values.prune
              ? [
                  `pruned ${result.prunedBlobs.length} files and ${result.prunedManifests.length} manifests nothing uses`,
                  ...result.pinnedManifests.map((m) => `kept manifest ${m.manifest.slice(0, 12)}: pinned by ${m.by.join(', ')}`),
                  ...(result.keptRecent ? [`kept ${result.keptRecent} files and manifests written within the grace period`] : []),
                ]
              : []),
          ].join('\n'),
        );
      }
      return 0;
    } finally {
      chosen.close();
    }
  },
};
