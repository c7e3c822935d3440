/**
 * The demo's closing lines: each method's held-out success with its interval, each improvement in paired
 * standard errors, ES against each baseline, the verdict, which method came out best, seeds, files.
 */
import type { DemoReport } from './demo.ts';

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

function rate(r: DemoReport['before']): string {
  return `${pct(r.successRate)} (${r.successes}/${r.tasks}, 95% CI ${pct(r.interval.low)}–${pct(r.interval.high)})`;
}

function diff(d: DemoReport['es']['difference']): string {
  const z = d.standardErrors === null ? (d.improvement === 0 ? '0' : '∞') : d.standardErrors.toFixed(2);
  return `${d.improvement >= 0 ? '+' : ''}${(d.improvement * 100).toFixed(1)} points, paired SE ${(d.standardError * 100).toFixed(1)} → ${z} SE (unpaired SE ${(d.unpairedStandardError * 100).toFixed(1)}; ${d.gained} tasks gained, ${d.lost} lost)`;
}

/** The method(s) with the most held-out successes after training. */
function best(r: DemoReport): string {
  const all = [
    ['ES', r.es.after.successes],
    ['random search', r.randomSearch.after.successes],
    ['GRPO', r.grpo.after.successes],
  ] as const;
  const top = Math.max(...all.map(([, s]) => s));
  return all.filter(([, s]) => s === top).map(([m]) => m).join(' = ');
}

/** A line naming the held-out episodes that failed, if any did (they count as unsolved). */
function failures(r: DemoReport): string[] {
  const all = [
    ['θ₀', r.before.failed],
    ['ES', r.es.after.failed],
    ['random search', r.randomSearch.after.failed],
    ['GRPO', r.grpo.after.failed],
  ] as const;
  if (all.every(([, n]) => n === 0)) return [];
  return [`WARNING: held-out episodes failed (counted unsolved): ${all.map(([m, n]) => `${m} ${n}`).join(', ')}; the verdict needs none at θ₀ and after ES`];
}

export function demoSummary(r: DemoReport): string {
  const env = r.config.run.environment;
  const options = Object.entries(env.options).map(([k, v]) => `${k} ${String(v)}`).join(', ');
  return [
    `setting: ${env.name} (${options}); held-out tasks (eval split, never trained on): ${r.heldOut.tasks}`,
    `before (θ₀):                 ${rate(r.before)}`,
    `after ES (${r.es.trainingEpisodes} training episodes): ${rate(r.es.after)}`,
    `after random search (${r.randomSearch.trainingEpisodes} episodes, best of ${r.randomSearch.candidates}): ${rate(r.randomSearch.after)}`,
    `after GRPO (${r.grpo.trainingEpisodes} episodes, G = ${r.config.grpo.group}): ${rate(r.grpo.after)}`,
    `ES improvement:              ${diff(r.es.difference)}`,
    `random-search improvement:   ${diff(r.randomSearch.difference)}`,
    `GRPO improvement:            ${diff(r.grpo.difference)}`,
    `ES − random search:          ${diff(r.esVersusRandomSearch)}`,
    `ES − GRPO:                   ${diff(r.esVersusGrpo)}`,
    ...failures(r),
    r.verdict,
    `most held-out successes: ${best(r)}`,
    `seeds: run ${r.seeds.run}, tasks ${r.seeds.tasks}, model ${r.seeds.model}`,
    `wall time: ${(r.wallMs / 1000).toFixed(0)} s (ES ${(r.es.wallMs / 1000).toFixed(0)} s, random search ${(r.randomSearch.wallMs / 1000).toFixed(0)} s, GRPO ${(r.grpo.wallMs / 1000).toFixed(0)} s)`,
    `demo report: ${r.files.demoReport}`,
    `ES report:   ${r.files.esReport}`,
    `curve:       ${r.files.curve}`,
    `comparison:  ${r.files.comparison} (held-out success of base, ES, random search and GRPO with 95% intervals, and their training curves)`,
  ].join('\n');
}
