import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { HorizonExperimentConfig, runConfigAt } from '../../trainer/studies/experiment/horizon-config.ts';

const committed = JSON.parse(readFileSync('configs/experiment-horizon.json', 'utf8'));

describe('the horizon experiment config', () => {
  it('runs each horizon with H blanks, no slack, evaluating θ_0 and the final θ only', () => {
    const c = HorizonExperimentConfig.parse(committed);
    for (const h of c.horizons) {
      const r = runConfigAt(c, h, 2);
      expect(r).toMatchObject({ name: `${c.name}-h${h}-s2`, seed: 2, iterations: c.run.iterations, evalInterval: c.run.iterations, environment: { options: { blanks: h, slack: 0 } } });
    }
  });

  it('rejects a GRPO group unequal to the population (the episode budgets would differ)', () => {
    const bad = HorizonExperimentConfig.safeParse({ ...committed, grpo: { ...committed.grpo, group: 8 } });
    expect(bad.success).toBe(false);
    expect(bad.error!.issues.map((i) => i.path.join('.'))).toEqual(['grpo.group']);
  });
});
