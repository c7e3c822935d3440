import { EvaluationView } from '../../../shared/schemas/index.ts';
import { parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { ApiClient, apiFlags, idArgument } from '../api-client.ts';

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

export function renderEvaluation(v: EvaluationView): string {
  const s = v.summary;
  return [
    `evaluation ${v.id}: ${v.status.state}${s.stopReason ? ` (${s.stopReason})` : ''}`,
    `success ${pct(s.successRate)} [95% CI ${pct(s.interval.low)}–${pct(s.interval.high)}] over ${s.episodes} episode(s)${s.failed ? `, ${s.failed} failed` : ''}; cost $${s.totalCostUsd.toFixed(6)} total, $${(s.meanCostUsdPerEpisode ?? 0).toFixed(6)} per episode`,
    s.note,
    '',
    `${'#'.padStart(4)}  ${'task'.padEnd(28)}  reward  ok   steps  tokens   cost (USD)  error`,
    ...v.episodes.map((e) =>
      [String(e.index).padStart(4), e.task.padEnd(28), e.reward.toFixed(3).padStart(6), (e.success ? 'yes' : 'no').padEnd(3), String(e.steps).padStart(5), String(e.tokens.prompt + e.tokens.completion).padStart(7), e.cost.usd.toFixed(8).padStart(11), e.error ?? ''].join('  '),
    ),
  ].join('\n');
}

export const command: Command = {
  name: 'evals show',
  usage: 'esopt evals show <id> [--api URL] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, apiFlags, true);
    const id = idArgument(p.positionals, 'evaluation');
    const view = await ApiClient.fromFlags(p.values).get(`/evaluations/${id}`, EvaluationView);
    io.stdout(p.json ? JSON.stringify(view) : renderEvaluation(view));
    return 0;
  },
};
