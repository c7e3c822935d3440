import { fileURLToPath } from 'node:url';
import { parseFlags } from '../args.ts';
import type { Command } from '../command.ts';
import { trainCommand } from './train.ts';

const DEMO = fileURLToPath(new URL('../../../configs/demo.json', import.meta.url));

export const command: Command = {
  name: 'start',
  summary: 'the demo: train configs/demo.json end to end (what `npm start` runs)',
  usage: 'esopt start [--store DIR] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, { store: { type: 'string' } });
    return trainCommand(['--config', DEMO, ...(p.values.store ? ['--store', String(p.values.store)] : []), ...(p.json ? ['--json'] : [])], io);
  },
};
