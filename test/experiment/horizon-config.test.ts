import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { HorizonExperimentConfig, runConfigAt } from '../../trainer/experiment/horizon-config.ts';

const committed = JSON.parse(readFileSync('configs/experiment-horizon.json', 'utf8'));

describe('the horizon experiment config', () => {
  it('runs each horizon with its own iterations, evaluating θ_0 and the final θ', () => {
    const c = HorizonExperimentConfig.parse(committed);
    for (const h of c.horizons) {
      const r = runConfigAt(c, h, 2);
      const iterations = c.iterationsAt[String(h)] ?? c.run.iterations;
      expect(r).toMatchObject({ name: `${c.name}-h${h}-s2`, seed: 2, iterations, evalInterval: iterations, environment: { options: { blanks: h, slack: 0 } } });
    }
  });

  it('rejects iterations for a horizon it does not run, and a GRPO group unequal to the population', () => {
    const bad = HorizonExperimentConfig.safeParse({ ...committed, iterationsAt: { '6': 2 }, grpo: { ...committed.grpo, group: 8 } });
    expect(bad.success).toBe(false);
    const paths = bad.error!.issues.map((i) => i.path.join('.'));
    expect(paths).toEqual(expect.arrayContaining(['iterationsAt.6', 'grpo.group']));
  });
});
