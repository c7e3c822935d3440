import { readFileSync, statSync } from 'node:fs';
import { basename, extname } from 'node:path';
import { z } from 'zod';
import { publishInstructions } from '../../../shared/instructions-catalog.ts';
import { INSTRUCTIONS_LIMITS, Instructions, InstructionsName } from '../../../shared/schemas/index.ts';
import { formatIssues } from '../../../shared/validation.ts';
import { flag, parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { storeFlags, storeFromFlags } from '../argv/store-flags.ts';
import { UsageError } from '../argv/usage-error.ts';

/** A file's text; one larger than any document may be is refused before it is read. */
function readDocument(file: string, limit: number): string {
  try {
    if (statSync(file).size > limit) throw new Error(`${file} is over ${limit} bytes, the most one document holds`);
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

export const command: Command = {
  name: 'instructions push',
  usage:
    'esopt instructions push --name NAME [--system SYSTEM.md] [SKILL.md ...] [--store DIR | --cloud] [--json]\n' +
    `  --system: the system text ({{environment}} in it is replaced by the environment's own prompt; without --system the environment's prompt is the text)\n` +
    `  SKILL.md: skill documents, named by their file name without its extension, appended in order (≤ ${INSTRUCTIONS_LIMITS.skills}; ≤ ${INSTRUCTIONS_LIMITS.totalBytes} bytes in all)`,
  async run(argv, io) {
    const p = parseFlags(argv, { ...storeFlags, name: { type: 'string' }, system: { type: 'string' } }, true);
    const name = flag(p.values, 'name', InstructionsName);
    const systemFile = flag(p.values, 'system', z.string().min(1).optional());
    if (systemFile === undefined && p.positionals.length === 0) throw new UsageError('give --system FILE, skill files, or both');
    const documents = {
      ...(systemFile !== undefined ? { system: readDocument(systemFile, INSTRUCTIONS_LIMITS.systemBytes) } : {}),
      skills: p.positionals.map((file) => ({ name: basename(file, extname(file)), text: readDocument(file, INSTRUCTIONS_LIMITS.skillBytes) })),
    };
    const checked = Instructions.safeParse(documents);
    if (!checked.success) throw new UsageError(`not valid instructions: ${formatIssues(checked.error)}`);
    const chosen = storeFromFlags(p);
    try {
      const { record: r, stored } = await publishInstructions(chosen.store, name, checked.data);
      if (p.json) io.stdout(JSON.stringify({ ...r, stored, store: chosen.where }));
      else {
        io.stdout(
          [
            `pushed instructions ${r.name} to ${chosen.where}: ${r.systemBytes ? `a system text of ${r.systemBytes} bytes` : "the environment's prompt"}${r.skills.length ? `, skills ${r.skills.join(', ')}` : ''}${stored ? '' : ' (these exact documents were stored already)'}`,
            `manifest ${r.manifestSha256}`,
          ].join('\n'),
        );
      }
      return 0;
    } finally {
      chosen.close();
    }
  },
};
