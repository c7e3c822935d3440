import { z } from 'zod';
import { Created } from '../../../shared/schemas/index.ts';
import { flag, parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { ApiClient, apiFlags } from '../api-client.ts';
import { readConfigFile } from './train.ts';

export const command: Command = {
  name: 'runs start',
  usage: 'esopt runs start --config FILE [--api URL] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, { ...apiFlags, config: { type: 'string' } });
    const client = ApiClient.fromFlags(p.values);
    const config = readConfigFile(flag(p.values, 'config', z.string().min(1)));
    const { id } = await client.post('/runs', config, Created);
    io.stdout(p.json ? JSON.stringify({ id }) : `started run ${id} — follow it with: esopt runs watch ${id}`);
    return 0;
  },
};
