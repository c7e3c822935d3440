/**
 * `esopt dev rehearse`: the deployed stack rehearsed on this machine from what a deploy ships
 * (trainer/dev/rehearsal/rehearse.ts), then used as a user would (rehearsal-report.ts). Exit 0 only when every
 * step worked; the report lists each failure, and every way the rehearsal differs from AWS.
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { BuiltInEnvironment } from '../../dev/rehearsal/scenarios.ts';
import { flag, parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { rehearse } from '../../dev/rehearsal/rehearsal-report.ts';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

export const command: Command = {
  name: 'dev rehearse',
  usage:
    'esopt dev rehearse [--replicas R] [--env sudoku,tools,web,heuristic] [--no-evaluations] [--box-install npm-ci|link] [--out FILE] [--json]\n' +
    '  builds every function as `sst deploy` does and runs it under aws-lambda-ric with its memory, /tmp and timeout;\n' +
    '  boots each box from the deploy artifact with its own boot script; then trains one iteration per environment through\n' +
    '  `esopt runs start`, evaluates an external endpoint keyed and unkeyed, and loads the dashboard and /docs. Needs root (cgroup v1, mount namespaces).',
  async run(argv, io) {
    const p = parseFlags(argv, {
      replicas: { type: 'string', default: '2' },
      env: { type: 'string', default: BuiltInEnvironment.options.join(',') },
      'no-evaluations': { type: 'boolean', default: false },
      'box-install': { type: 'string', default: 'npm-ci' },
      out: { type: 'string' },
    });
    const replicas = flag(p.values, 'replicas', z.coerce.number().int().min(1).max(4));
    const environments = flag(p.values, 'env', z.string().transform((s) => s.split(',').map((x) => x.trim())).pipe(z.array(BuiltInEnvironment).min(1)));
    const boxInstall = flag(p.values, 'box-install', z.enum(['npm-ci', 'link']));
    const log = (m: string) => {
      if (!p.json) io.stderr(m);
    };
    const report = await rehearse({ root: ROOT, replicas, environments, evaluations: !p.values['no-evaluations'], boxInstall, log });
    if (typeof p.values.out === 'string') writeFileSync(p.values.out, `${JSON.stringify(report, null, 2)}\n`);
    if (p.json) io.stdout(JSON.stringify(report));
    else {
      const lines = [
        `rehearsal ${report.ok ? 'PASSED' : 'FAILED'} in ${report.seconds.toFixed(0)} s`,
        ...report.functions.map((f) => `  function ${f.name}: ${f.unzipped_mb} MB unzipped, installed ${f.installed.join(', ') || 'nothing'}`),
        ...report.boxes.map((b) => `  box ${b.id} at ${b.url}${b.followed_runs === null ? '' : `, followed ${b.followed_runs}/${report.trainings.length} runs`}`),
        ...report.trainings.map((t) => `  train ${t.environment}: ${t.state}, ${t.counted}/${t.expected} counted, ${t.failed} failed`),
        ...report.evaluations.map((e) => `  evaluate ${e.environment} ${e.keyed ? 'keyed' : 'unkeyed'}: ${e.state}, ${e.episodes - e.failed}/${e.episodes} episodes without error`),
        `  pages: ${report.pages.filter((x) => x.status === 200).length}/${report.pages.length} answered 200`,
        ...report.sizing.map((s) => `  ${s.function} ${s.environment}: peak ${s.peak_memory_mb} MB of ${s.configured.memory_mb}, /tmp ${s.peak_tmp_mb} MB of ${s.configured.ephemeral_storage_mb}, ${s.invocations} invocations`),
        ...report.failures.map((f) => `  FAILED: ${f}`),
        `  differs from AWS: ${report.replaced.map((r) => r.step).join('; ')} (--json for why)`,
      ];
      io.stdout(lines.join('\n'));
    }
    return report.ok ? 0 : 1;
  },
};
