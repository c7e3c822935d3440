import { listNamedModels } from '../../../shared/model-catalog.ts';
import { parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { storeFlags, storeFromFlags } from '../argv/store-flags.ts';
import { formatBytes } from '../../training/model-store/transfer-progress.ts';
import { UsageError } from '../argv/usage-error.ts';

export const command: Command = {
  name: 'models list',
  usage: 'esopt models list [--store DIR | --cloud] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, storeFlags);
    if (p.positionals.length) throw new UsageError('models list takes no arguments');
    const chosen = storeFromFlags(p);
    try {
      const models = (await listNamedModels(chosen.store)).map((m) => ({
        name: m.name,
        manifestSha256: m.manifestSha256,
        files: m.manifest.files.length,
        bytes: m.manifest.files.reduce((n, f) => n + f.bytes, 0),
        pushedAt: m.pushedAt,
      }));
      if (p.json) io.stdout(JSON.stringify({ store: chosen.where, models }));
      else if (!models.length) io.stdout(`no models in ${chosen.where} (esopt models push DIR)`);
      else {
        const width = Math.max(4, ...models.map((m) => m.name.length));
        io.stdout(
          [`${'NAME'.padEnd(width)}  MANIFEST      FILES  SIZE        PUSHED`, ...models.map((m) => `${m.name.padEnd(width)}  ${m.manifestSha256.slice(0, 12)}  ${String(m.files).padStart(5)}  ${formatBytes(m.bytes).padEnd(10)}  ${m.pushedAt}`)].join('\n'),
        );
      }
      return 0;
    } finally {
      chosen.close();
    }
  },
};
