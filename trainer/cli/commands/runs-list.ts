import { RunList, type RunSummary } from '../../../shared/schemas/index.ts';
import { parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { ApiClient, apiFlags } from '../api-client.ts';

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

/** Held-out success of the latest evaluation with its interval and iteration, and its failed episodes. */
export function heldOutLine(h: RunSummary['heldOut']): string {
  if (!h) return 'held-out: not evaluated yet';
  const failed = h.failed ? `; ${h.failed} of ${h.tasks} failed${h.topError ? `, most often (${h.topError.count}×): ${h.topError.message}` : ''}` : '';
  return `held-out ${pct(h.successRate)} [95% CI ${pct(h.interval.low)}–${pct(h.interval.high)}] of ${h.tasks} at θ_${h.iteration}${failed}`;
}

function line(r: RunSummary): string {
  const h = r.heldOut;
  const heldOut = h ? `${pct(h.successRate)} (${pct(h.interval.low)}–${pct(h.interval.high)}) @${h.iteration}${h.failed ? `, ${h.failed} failed` : ''}` : '–';
  return [r.id.padEnd(36), r.state.padEnd(10), r.environment.padEnd(9), `${r.completedIterations}/${r.iterations}`.padStart(9), heldOut].join('  ');
}

export const command: Command = {
  name: 'runs list',
  usage: 'esopt runs list [--api URL] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, apiFlags);
    const client = ApiClient.fromFlags(p.values);
    // Every page, 500 at a time: GET /runs pages by id.
    const runs: RunList['runs'] = [];
    for (let after: string | null | undefined; after !== null; ) {
      const page = await client.get(`/runs?limit=500${after ? `&after=${encodeURIComponent(after)}` : ''}`, RunList);
      runs.push(...page.runs);
      after = page.next;
    }
    runs.sort((a, b) => (b.requestedAt ?? '').localeCompare(a.requestedAt ?? '') || a.id.localeCompare(b.id));
    if (p.json) io.stdout(JSON.stringify({ runs }));
    else io.stdout([`${'run'.padEnd(36)}  ${'state'.padEnd(10)}  ${'env'.padEnd(9)}  ${'iters'.padStart(9)}  held-out success (95% CI) @θ`, ...runs.map(line)].join('\n'));
    return 0;
  },
};
