import { z } from 'zod';
import { Created } from '../../../shared/schemas/index.ts';
import { flag, parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { ApiClient, apiFlags } from '../api-client.ts';
import { readConfigFile } from '../argv/config-file.ts';
import { UsageError } from '../argv/usage-error.ts';
import { ENVIRONMENT_KEY_HEADER } from '../../../functions/http-api/environment-key.ts';

export const command: Command = {
  name: 'runs start',
  usage: 'esopt runs start --config FILE [--environment-key-env VAR] [--api URL] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, { ...apiFlags, config: { type: 'string' }, 'environment-key-env': { type: 'string' } });
    const client = ApiClient.fromFlags(p.values);
    const config = readConfigFile(flag(p.values, 'config', z.string().min(1)));
    // The key of the endpoint the environment names goes in a header (the stack keeps it in its secret store), never in the config.
    const keyEnv = flag(p.values, 'environment-key-env', z.string().regex(/^[A-Z_][A-Z0-9_]*$/, 'must be an environment variable name').optional());
    const key = keyEnv === undefined ? undefined : process.env[keyEnv];
    if (keyEnv !== undefined && !key) throw new UsageError(`--environment-key-env: ${keyEnv} is not set`);
    const { id } = await client.post('/runs', config, Created, key ? { [ENVIRONMENT_KEY_HEADER]: key } : {});
    io.stdout(p.json ? JSON.stringify({ id }) : `started run ${id} — follow it with: esopt runs watch ${id}`);
    return 0;
  },
};
