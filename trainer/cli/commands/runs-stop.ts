import { StopAccepted } from '../../../shared/schemas/index.ts';
import { parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { ApiClient, apiFlags, idArgument } from '../api-client.ts';

export const command: Command = {
  name: 'runs stop',
  usage: 'esopt runs stop <id> [--api URL] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, apiFlags, true);
    const id = idArgument(p.positionals, 'run');
    const accepted = await ApiClient.fromFlags(p.values).post(`/runs/${id}/stop`, {}, StopAccepted);
    io.stdout(p.json ? JSON.stringify(accepted) : `run ${id}: stop requested (${accepted.state}); it ends after the current iteration`);
    return 0;
  },
};
