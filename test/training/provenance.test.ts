/** A report's provenance: this checkout's commit and whether tracked files differ, the time, the load. */
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { Provenance, provenance } from '../../trainer/training/provenance.ts';

describe('provenance', () => {
  it("names this checkout's HEAD, whether tracked files differ from it, the given time and three load averages", () => {
    const made = provenance(new Date('2026-12-06T06:00:00Z'));
    expect(Provenance.parse(made)).toEqual(made);
    expect(made.commit).toBe(execFileSync('git', ['rev-parse', 'HEAD'], { encoding: 'utf8' }).trim());
    const changed = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8' }).trim() !== '';
    expect(made.dirty).toBe(changed);
    expect(made.date).toBe('2026-12-06T06:00:00.000Z');
    expect(made.load).toHaveLength(3);
    for (const l of made.load) expect(l).toBeGreaterThanOrEqual(0);
  });
});
