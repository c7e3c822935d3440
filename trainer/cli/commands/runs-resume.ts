import { ResumeAccepted } from '../../../shared/schemas/index.ts';
import { parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { extensionFlags, extensionFromFlags, extensionUsage } from '../argv/extension-flags.ts';
import { ApiClient, apiFlags, idArgument } from '../api-client.ts';

export const command: Command = {
  name: 'runs resume',
  usage:
    `esopt runs resume <id> ${extensionUsage} [--api URL] [--json]\n` +
    '  goes on with a run that stopped (at its budget or on request), failed or finished, from its checkpoint;\n' +
    '  on the stack also with one still under way whose trainer box died and whose queue entry is gone;\n' +
    '  --iterations N is its length in all, a --max-* limit replaces the stored one (none: no limit)',
  async run(argv, io) {
    const p = parseFlags(argv, { ...apiFlags, ...extensionFlags }, true);
    const id = idArgument(p.positionals, 'run');
    const accepted = await ApiClient.fromFlags(p.values).post(`/runs/${id}/resume`, extensionFromFlags(p.values) ?? {}, ResumeAccepted);
    const changed = accepted.changes.length ? accepted.changes.join(', ') : 'config unchanged';
    io.stdout(p.json ? JSON.stringify(accepted) : `run ${id}: resumed after ${accepted.completedIterations} of ${accepted.iterations} iterations (${accepted.state}); ${changed}`);
    return 0;
  },
};
