import { readNamedModel } from '../../../shared/model-catalog.ts';
import { parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { storeFlags, storeFromFlags } from '../argv/store-flags.ts';
import { formatBytes } from '../../training/model-store/transfer-progress.ts';
import { nameArgument } from '../argv/model-name-argument.ts';

export const command: Command = {
  name: 'models show',
  usage: 'esopt models show NAME [--store DIR | --cloud] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, storeFlags, true);
    const name = nameArgument(p.positionals);
    const chosen = storeFromFlags(p);
    try {
      const model = await readNamedModel(chosen.store, name);
      if (!model) throw new Error(`no model named ${name} in ${chosen.where} (esopt models list shows those there are)`);
      const bytes = model.manifest.files.reduce((n, f) => n + f.bytes, 0);
      if (p.json) io.stdout(JSON.stringify({ ...model, bytes, store: chosen.where }));
      else {
        io.stdout(
          [
            `model ${model.name} in ${chosen.where}: ${model.manifest.files.length} files, ${formatBytes(bytes)}, pushed ${model.pushedAt}`,
            `manifest ${model.manifestSha256}`,
            ...model.manifest.files.map((f) => `  ${f.sha256.slice(0, 12)}  ${formatBytes(f.bytes).padStart(10)}  ${f.path}`),
          ].join('\n'),
        );
      }
      return 0;
    } finally {
      chosen.close();
    }
  },
};
