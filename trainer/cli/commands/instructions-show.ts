import { readInstructions, readNamedInstructions } from '../../../shared/instructions-catalog.ts';
import { InstructionsName } from '../../../shared/schemas/index.ts';
import { parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { storeFlags, storeFromFlags } from '../argv/store-flags.ts';
import { UsageError } from '../argv/usage-error.ts';

export const command: Command = {
  name: 'instructions show',
  usage: 'esopt instructions show NAME [--store DIR | --cloud] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, storeFlags, true);
    if (p.positionals.length !== 1) throw new UsageError('give exactly one instructions name');
    const name = InstructionsName.safeParse(p.positionals[0]);
    if (!name.success) throw new UsageError(`not a valid instructions name: ${JSON.stringify(p.positionals[0])} (${name.error.issues[0]?.message})`);
    const chosen = storeFromFlags(p);
    try {
      const r = await readNamedInstructions(chosen.store, name.data);
      if (!r) throw new Error(`no instructions named ${name.data} in ${chosen.where} (esopt instructions list shows those there are)`);
      const documents = await readInstructions(chosen.store, r.manifestSha256);
      if (!documents) throw new Error(`instructions ${r.name} point at ${r.manifestSha256}, which is not in ${chosen.where}`);
      if (p.json) io.stdout(JSON.stringify({ ...r, documents, store: chosen.where }));
      else {
        io.stdout(
          [
            `instructions ${r.name} in ${chosen.where}, pushed ${r.pushedAt}`,
            `manifest ${r.manifestSha256}`,
            `── system${documents.system === undefined ? " (the environment's prompt)" : ''}`,
            ...(documents.system !== undefined ? [documents.system] : []),
            ...documents.skills.flatMap((s) => [`── skill ${s.name}`, s.text]),
          ].join('\n'),
        );
      }
      return 0;
    } finally {
      chosen.close();
    }
  },
};
