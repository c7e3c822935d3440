import { parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { storeFlags, storeFromFlags } from '../argv/store-flags.ts';
import { removeModel } from '../../training/model-store/remove-model.ts';
import { nameArgument } from '../argv/model-name-argument.ts';

export const command: Command = {
  name: 'models rm',
  usage:
    'esopt models rm NAME [--prune] [--store DIR | --cloud] [--json]\n' +
    '  removes the name; its files stay (other names and runs pinned to it use them) unless --prune, which deletes\n' +
    '  every stored file and manifest no remaining name uses: runs pinned to those can then no longer resume',
  async run(argv, io) {
    const p = parseFlags(argv, { ...storeFlags, prune: { type: 'boolean' } }, true);
    const name = nameArgument(p.positionals);
    const chosen = storeFromFlags(p);
    try {
      const result = await removeModel(chosen.store, name, { prune: p.values.prune === true });
      if (!result.removed && !p.values.prune) throw new Error(`no model named ${name} in ${chosen.where}`);
      if (p.json) io.stdout(JSON.stringify({ ...result, store: chosen.where }));
      else {
        io.stdout(
          [
            result.removed ? `removed ${name} from ${chosen.where}` : `no model named ${name} in ${chosen.where}`,
            ...(p.values.prune ? [`pruned ${result.prunedBlobs.length} files and ${result.prunedManifests.length} manifests no name uses`] : []),
          ].join('\n'),
        );
      }
      return 0;
    } finally {
      chosen.close();
    }
  },
};
