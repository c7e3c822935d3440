import { z } from 'zod';
import { CONTRACT_NAMES, jsonSchemas, type ContractName } from '../../../shared/schemas/json-schema.ts';
import { flag, parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';

/** `esopt schemas [--name N]`: the contract's messages as JSON Schema (one object by name, or all). */
export const command: Command = {
  name: 'schemas',
  usage: `esopt schemas [--name ${CONTRACT_NAMES.join('|')}]\n  the messages that cross a process or network boundary, as JSON Schema (input form: defaulted fields optional); always JSON`,
  async run(argv, io) {
    const p = parseFlags(argv, { name: { type: 'string' } });
    const name = p.values.name === undefined ? undefined : flag(p.values, 'name', z.enum(CONTRACT_NAMES as [ContractName, ...ContractName[]]));
    const all = jsonSchemas();
    io.stdout(JSON.stringify(name ? all[name] : all, null, 2));
    return 0;
  },
};
