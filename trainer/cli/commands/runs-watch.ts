import cliProgress from 'cli-progress';
import { RunDetail } from '../../../shared/schemas/index.ts';
import { parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { ApiClient, apiFlags, idArgument } from '../api-client.ts';

export const command: Command = {
  name: 'runs watch',
  usage: 'esopt runs watch <id> [--api URL] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, apiFlags, true);
    const id = idArgument(p.positionals, 'run');
    const client = ApiClient.fromFlags(p.values);
    const run = await client.get(`/runs/${id}`, RunDetail);
    const bar = p.json
      ? null
      : new cliProgress.SingleBar(
          { stream: process.stderr, format: `${id} |{bar}| iter {value}/{total} | rewards {arrived} | reward {reward} | eval {success}`, hideCursor: true, noTTYOutput: true, notTTYSchedule: 2000 },
          cliProgress.Presets.shades_classic,
        );
    bar?.start(run.iterations, run.completedIterations, { arrived: '–', reward: '–', success: '–' });
    let final = 'unknown';
    for await (const event of client.events(id)) {
      if (p.json) io.stdout(JSON.stringify(event));
      if (event.type === 'rewards') bar?.update({ arrived: `${event.arrived}/${event.expected}` });
      if (event.type === 'update-applied') bar?.update(event.iteration + 1, { reward: event.row.meanReward?.toFixed(3) ?? 'n/a' });
      if (event.type === 'evaluation') bar?.update({ success: `${(event.result.successRate * 100).toFixed(0)}% @${event.iteration}` });
      if (event.type === 'end') final = event.state;
    }
    bar?.stop();
    if (!p.json) io.stdout(`run ${id}: ${final}`);
    return final === 'failed' ? 1 : 0;
  },
};
