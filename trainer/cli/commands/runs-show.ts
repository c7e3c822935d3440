import { heldOutLine } from './runs-list.ts';
import { RunDetail } from '../../../shared/schemas/index.ts';
import { parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { ApiClient, apiFlags, idArgument } from '../api-client.ts';

/** The run's limits, if any, e.g. " of budget $5, 1000 episodes". */
function budgetText(b: RunDetail['config']['budget']): string {
  const parts = [b.maxCostUsd !== undefined ? `$${b.maxCostUsd}` : null, b.maxEpisodes !== undefined ? `${b.maxEpisodes} episodes` : null, b.maxHours !== undefined ? `${b.maxHours} h` : null].filter(Boolean);
  return parts.length ? ` of budget ${parts.join(', ')}` : '';
}

export const command: Command = {
  name: 'runs show',
  usage: 'esopt runs show <id> [--api URL] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, apiFlags, true);
    const id = idArgument(p.positionals, 'run');
    const run = await ApiClient.fromFlags(p.values).get(`/runs/${id}`, RunDetail);
    if (p.json) {
      io.stdout(JSON.stringify(run));
      return 0;
    }
    const l = run.latest;
    io.stdout(
      [
        `run ${run.id} (${run.environment}): ${run.state}${run.stopRequested && run.state !== 'stopped' ? ', stop requested' : ''}`,
        `iterations: ${run.completedIterations} of ${run.iterations} done${run.current ? `; iteration ${run.current.iteration} in flight, ${run.current.arrived}/${run.current.expected} rewards in` : ''}`,
        heldOutLine(run.heldOut),
        l
          ? `latest iteration ${l.iteration} (training): mean reward ${l.meanReward ?? 'n/a'}, train success ${l.successRate ?? 'n/a'}, ${l.counted}/${l.expected} counted${l.failed ? `, ${l.failed} failed${l.topError ? ` (most often, ${l.topError.count}×: ${l.topError.message})` : ''}` : ''}, $${l.cost.usd.toFixed(6)}`
          : 'no iteration finished yet',
        ...(run.status?.stopReason ? [`stopped: ${run.status.stopReason}`] : []),
        ...(l?.spent ? [`spent: $${l.spent.usd.toFixed(6)}, ${l.spent.episodes} episodes, ${(l.spent.wallMs / 3_600_000).toFixed(3)} h${budgetText(run.config.budget)}`] : []),
        ...(run.status?.error ? [`error: ${run.status.error}`] : []),
      ].join('\n'),
    );
    return 0;
  },
};
