import { RunList, type RunSummary } from '../../../shared/schemas/index.ts';
import { parseFlags } from '../../command/args.ts';
import type { Command } from '../../command/command.ts';
import { ApiClient, apiFlags } from '../api-client.ts';

function line(r: RunSummary): string {
  const reward = r.latest?.meanReward;
  return [r.id.padEnd(36), r.state.padEnd(10), r.environment.padEnd(9), `${r.completedIterations}/${r.iterations}`.padStart(9), reward === null || reward === undefined ? '–' : reward.toFixed(3)].join('  ');
}

export const command: Command = {
  name: 'runs list',
  usage: 'esopt runs list [--api URL] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, apiFlags);
    const { runs } = await ApiClient.fromFlags(p.values).get('/runs', RunList);
    if (p.json) io.stdout(JSON.stringify({ runs }));
    else io.stdout([`${'run'.padEnd(36)}  ${'state'.padEnd(10)}  ${'env'.padEnd(9)}  ${'iters'.padStart(9)}  reward`, ...runs.map(line)].join('\n'));
    return 0;
  },
};
