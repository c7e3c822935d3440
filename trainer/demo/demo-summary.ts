/** The demo's closing lines: before, after ES, after random search, the verdict in standard errors, seeds, files. */
import type { DemoReport } from './demo.ts';

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

function rate(r: DemoReport['before']): string {
  return `${pct(r.successRate)} (${r.successes}/${r.tasks}, 95% CI ${pct(r.interval.low)}–${pct(r.interval.high)})`;
}

function diff(d: DemoReport['es']['difference']): string {
  const z = d.standardErrors === null ? (d.improvement === 0 ? '0' : '∞') : d.standardErrors.toFixed(2);
  return `${d.improvement >= 0 ? '+' : ''}${(d.improvement * 100).toFixed(1)} points, paired SE ${(d.standardError * 100).toFixed(1)} → ${z} SE (unpaired SE ${(d.unpairedStandardError * 100).toFixed(1)}; ${d.gained} tasks gained, ${d.lost} lost)`;
}

export function demoSummary(r: DemoReport): string {
  const env = r.config.environment;
  return [
    `held-out ${env.name} tasks (eval split, never trained on): ${r.heldOut.tasks}`,
    `before (θ₀):                 ${rate(r.before)}`,
    `after ES (${r.es.trainingEpisodes} training episodes):   ${rate(r.es.after)}`,
    `after random search (${r.randomSearch.trainingEpisodes} episodes, best of ${r.randomSearch.candidates}): ${rate(r.randomSearch.after)}`,
    `ES improvement:              ${diff(r.es.difference)}`,
    `random-search improvement:   ${diff(r.randomSearch.difference)}`,
    `ES − random search:          ${diff(r.esVersusRandomSearch)}`,
    `${r.passed ? 'PASSED' : 'NOT PASSED'}: the ES improvement ${r.passed ? 'exceeds' : 'does not exceed'} ${r.requiredStandardErrors} standard errors`,
    `seeds: run ${r.seeds.run}, tasks ${r.seeds.tasks}, model ${r.seeds.model}`,
    `wall time: ${(r.wallMs / 1000).toFixed(0)} s (ES ${(r.es.wallMs / 1000).toFixed(0)} s, random search ${(r.randomSearch.wallMs / 1000).toFixed(0)} s)`,
    `demo report: ${r.files.demoReport}`,
    `ES report:   ${r.files.esReport}`,
    `curve:       ${r.files.curve}`,
  ].join('\n');
}
