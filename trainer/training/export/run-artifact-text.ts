/**
 * The run artifact's flat text form (run.txt), for replays in languages without a JSON parser at hand
 * (scripts/reference-replay/replay.c). One record a line, fields split by single spaces; every float64 is
 * written as the 16 hex digits of its IEEE-754 bits, so it is read back exactly with no decimal parsing.
 * docs/REPLAY.md gives the grammar:
 *
 *   esopt-run/2
 *   noise <id> <version>
 *   mode <full|lowrank> <rank>
 *   theta0 <hash>
 *   tensors <T> <params>
 *   tensor <offset> <count> <updated 0|1> <name>   × T  (name URI-encoded: no spaces)
 *   targets <M>
 *   target <tensor> <m> <n> <transposed 0|1> <offset>  × M  (M = 0 in full mode)
 *   updates <K>
 *   update <iteration> <runSeed> <decay bits> <C> <thetaHashAfter>  × K, each followed by
 *   coef <noiseIndex> <coef bits>                  × C
 */
import type { RunArtifact } from '../../../shared/schemas/index.ts';

/** The 16 lowercase hex digits of a float64's bits (sign, exponent, mantissa; big-endian reading). */
export function float64Bits(x: number): string {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  return view.getBigUint64(0).toString(16).padStart(16, '0');
}

export function runArtifactText(a: RunArtifact): string {
  const lines = [a.format, `noise ${encodeURIComponent(a.noise.id)} ${a.noise.version}`, `mode ${a.mode} ${a.rank}`, `theta0 ${a.theta0Hash}`];
  lines.push(`tensors ${a.layout.tensors.length} ${a.layout.params}`);
  for (const t of a.layout.tensors) lines.push(`tensor ${t.offset} ${t.count} ${t.updated ? 1 : 0} ${encodeURIComponent(t.name)}`);
  const targets = a.lowRankTargets ?? [];
  lines.push(`targets ${targets.length}`);
  for (const t of targets) lines.push(`target ${t.tensor} ${t.m} ${t.n} ${t.transposed ? 1 : 0} ${t.offset}`);
  lines.push(`updates ${a.updates.length}`);
  for (const u of a.updates) {
    lines.push(`update ${u.iteration} ${u.runSeed} ${float64Bits(u.decay)} ${u.coefficients.length} ${u.thetaHashAfter}`);
    for (const c of u.coefficients) lines.push(`coef ${c.noiseIndex} ${float64Bits(c.coef)}`);
  }
  return `${lines.join('\n')}\n`;
}
