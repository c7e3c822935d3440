import { describe, expect, it } from 'vitest';
import { pairedDifference } from '../../trainer/studies/demo/paired-difference.ts';

describe('paired difference', () => {
  it('is the mean per-task change with the sample SE of the differences', () => {
    // 10 tasks: 4 gained, 1 lost, 5 unchanged → d = [1,1,1,1,-1,0,0,0,0,0]
    const before = [false, false, false, false, true, true, false, true, false, false];
    const after = [true, true, true, true, false, true, false, true, false, false];
    const d = pairedDifference(before, after);
    expect(d.improvement).toBeCloseTo(0.3, 12);
    const mean = 0.3;
    const variance = (4 * (1 - mean) ** 2 + (-1 - mean) ** 2 + 5 * mean ** 2) / 9;
    expect(d.standardError).toBeCloseTo(Math.sqrt(variance / 10), 12);
    expect(d.standardErrors).toBeCloseTo(0.3 / Math.sqrt(variance / 10), 10);
    expect([d.gained, d.lost, d.before, d.after]).toEqual([4, 1, 0.3, 0.6]);
    expect(d.unpairedStandardError).toBeCloseTo(Math.sqrt((0.3 * 0.7) / 10 + (0.6 * 0.4) / 10), 12);
  });

  it('pairing is tighter than the unpaired SE when the same tasks stay solved', () => {
    const before = Array.from({ length: 100 }, (_, i) => i < 40);
    const after = Array.from({ length: 100 }, (_, i) => i < 60);
    const d = pairedDifference(before, after);
    expect(d.standardError).toBeLessThan(d.unpairedStandardError);
    expect(d.standardErrors).toBeGreaterThan(3);
  });

  it('no change is 0 SE, not NaN; mismatched or tiny inputs are errors', () => {
    expect(pairedDifference([true, false], [true, false]).standardErrors).toBe(0);
    expect(() => pairedDifference([true], [true])).toThrow(/at least 2/);
    expect(() => pairedDifference([true, false], [true])).toThrow(/same tasks/);
  });
});
