/**
 * `esopt evals compare A B …`: several agents' evaluations of the same tasks, success (95% interval) against
 * cost per episode, the Pareto frontier marked (shared/evaluation-comparison.ts). Each argument is an
 * evaluation id, read from the API as its result file (`GET /evaluations/{id}/result`), or a result file on
 * disk (`….json`, e.g. one another team sent), so published results compare with your own.
 * Evaluations of other tasks or another judge are refused, naming the argument.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { compareEvaluations } from '../../../shared/evaluation-comparison.ts';
import { EvaluationResultFile, type EvaluationComparison } from '../../../shared/schemas/index.ts';
import { formatIssues } from '../../../shared/validation.ts';
import { flag, parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { UsageError } from '../argv/usage-error.ts';
import { ApiClient, apiFlags, idArgument } from '../api-client.ts';

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

function modelText(m: EvaluationComparison['evaluations'][number]['model']): string {
  if (m.kind === 'external') return `${m.model} @ ${new URL(m.baseUrl).host}`;
  if (m.kind === 'checkpoint') return `${m.run}${m.iteration === undefined ? '' : `@${m.iteration}`}`;
  return 'base';
}

export function renderComparison(c: EvaluationComparison): string {
  const s = c.suite;
  const rows = c.evaluations.map((e) => [
    e.id,
    modelText(e.model),
    `${pct(e.successRate)} [${pct(e.interval.low)}–${pct(e.interval.high)}]`,
    `${e.successes}/${e.episodes}`,
    `$${e.meanCostUsdPerEpisode.toFixed(6)}`,
    e.frontier ? '* frontier' : `dominated by ${e.dominatedBy.join(', ')}`,
  ]);
  const head = ['evaluation', 'model', 'success [95% CI]', 'ok/n', 'cost/episode', 'Pareto'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) => r.map((x, i) => x.padEnd(widths[i]!)).join('  ').trimEnd();
  return [
    `suite ${s.name}${s.manifest ? ` (manifest ${s.manifest})` : ''}: ${s.tasks} ${s.environment} task(s), tasks sha256 ${s.tasksSha256}`,
    `judge ${c.judge.environment} v${c.judge.version}: success at reward ≥ ${c.judge.successThreshold}`,
    '',
    line(head),
    ...rows.map(line),
    '',
    `frontier (cheapest first): ${c.frontier.join(', ')}`,
  ].join('\n');
}

/** A result file from disk, checked against the format; the error names the argument. */
function readResultFile(path: string, at: string): EvaluationResultFile {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new UsageError(`${at}: cannot read ${path}: ${(err as Error).message}`);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${at}: ${path} is not JSON: ${(err as Error).message}`);
  }
  const parsed = EvaluationResultFile.safeParse(json);
  if (!parsed.success) throw new UsageError(`${at}: ${path} is not a result file (version 1): ${formatIssues(parsed.error)}`);
  return parsed.data;
}

export const command: Command = {
  name: 'evals compare',
  usage: 'esopt evals compare <id|result.json> <id|result.json> [...] [--results DIR] [--api URL] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, { ...apiFlags, results: { type: 'string' } }, true);
    if (p.positionals.length < 2) throw new UsageError('give at least 2 evaluation ids or result files');
    const resultsDir = flag(p.values, 'results', z.string().min(1).optional());
    let client: ApiClient | undefined;
    const files = await Promise.all(
      p.positionals.map(async (arg, n) => {
        const at = `argument ${n + 1}`;
        if (arg.endsWith('.json')) return readResultFile(arg, at);
        client ??= ApiClient.fromFlags(p.values);
        const id = idArgument([arg], 'evaluation');
        return client.get(`/evaluations/${id}/result`, EvaluationResultFile);
      }),
    );
    if (resultsDir !== undefined) {
      mkdirSync(resultsDir, { recursive: true });
      for (const f of files) writeFileSync(join(resultsDir, `${f.evaluation}.json`), `${JSON.stringify(f, null, 2)}\n`);
    }
    const outcome = compareEvaluations(files, 'args');
    if (!outcome.ok) {
      // `args.1` is the second argument: say it the way it was typed.
      const where = (path: string) => path.replace(/^args\.(\d+)$/, (_m, n: string) => `argument ${Number(n) + 1} (${p.positionals[Number(n)]})`);
      throw new Error(`cannot compare these evaluations:\n${outcome.issues.map((i) => `  ${where(i.path)}: ${i.message}`).join('\n')}`);
    }
    io.stdout(p.json ? JSON.stringify(outcome.comparison) : renderComparison(outcome.comparison));
    return 0;
  },
};
