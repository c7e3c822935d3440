/**
 * RunConfig's `mode: "lora"`: `lora` (rank, alpha, targets) is required in that mode and refused in the
 * others, its bad values are zod errors at their field path, and run targets are refused in its favour.
 */
import { describe, expect, it } from 'vitest';
import { RunConfig, type RunConfigInput } from '../../shared/schemas/index.ts';

const base: RunConfigInput = {
  environment: { name: 'sudoku' },
  model: { preset: 'tiny' },
  es: { population: 4, sigma: 0.05, alpha: 0.1 },
  iterations: 2,
};

/** The issues of a config that does not parse, as `path: message`. */
function issues(input: unknown): string[] {
  const r = RunConfig.safeParse(input);
  if (r.success) throw new Error('the config parsed');
  return r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
}

describe('RunConfig mode lora', () => {
  it('parses with its options, targets defaulting to all-linear', () => {
    const c = RunConfig.parse({ ...base, mode: 'lora', lora: { rank: 16, alpha: 32 } });
    expect(c.mode).toBe('lora');
    expect(c.lora).toEqual({ rank: 16, alpha: 32, targets: 'all-linear' });
    expect(RunConfig.parse({ ...base, mode: 'lora', lora: { rank: 2, alpha: 4, targets: { include: ['q_proj,v_proj'] } } }).lora?.targets).toEqual({ include: ['q_proj,v_proj'], exclude: [] });
  });

  it('needs lora in lora mode and refuses it in the others', () => {
    expect(issues({ ...base, mode: 'lora' })).toEqual(['lora: is required when mode is "lora": { rank, alpha, targets }']);
    expect(issues({ ...base, mode: 'full', lora: { rank: 4, alpha: 8 } })).toEqual(['lora: is only for mode "lora" (this run\'s mode is "full")']);
    expect(issues({ ...base, lora: { rank: 4, alpha: 8 } })).toEqual(['lora: is only for mode "lora" (this run\'s mode is "full")']);
    expect(issues({ ...base, mode: 'lowrank', lora: { rank: 4, alpha: 8 } })).toEqual(['lora: is only for mode "lora" (this run\'s mode is "lowrank")']);
  });

  it('names the field of a bad value', () => {
    expect(issues({ ...base, mode: 'lora', lora: { rank: 0, alpha: 8 } })).toEqual(['lora.rank: must be at least 1']);
    expect(issues({ ...base, mode: 'lora', lora: { rank: 4, alpha: -1 } })).toEqual(['lora.alpha: must be positive']);
    expect(issues({ ...base, mode: 'lora', lora: { rank: 4, alpha: 8, dropout: 0.1 } })[0]).toMatch(/^lora: Unrecognized key: "dropout"/);
    expect(issues({ ...base, mode: 'lora', lora: { rank: 4, alpha: 8, targets: { include: ['(q'] } } })[0]).toMatch(/^lora\.targets\.include\.0: /);
    expect(issues({ ...base, mode: 'lora', lora: { rank: 4, alpha: 8 }, targets: 'all-linear' })).toEqual(['targets: is for full and low-rank mode; in lora mode set lora.targets (the matrices the adapters attach to)']);
    expect(issues({ ...base, mode: 'adapters' })[0]).toMatch(/^mode: /);
  });
});
