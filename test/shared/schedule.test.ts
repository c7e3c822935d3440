import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { esAt, Schedule, scheduleAt } from '../../shared/schedule.ts';
import { RunConfig } from '../../shared/schemas/index.ts';
import { baseConfig, esopt } from '../training/helpers/killable-run.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-schedule-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const at = (s: unknown, iterations: number) => Array.from({ length: iterations }, (_, k) => Number(scheduleAt(Schedule.parse(s), k, iterations).toFixed(12)));

describe('σ and α schedules', () => {
  it('gives each iteration its value: constant, linear, cosine (half-way at the middle), step with a floor, after a warm-up', () => {
    expect(at(0.1, 3)).toEqual([0.1, 0.1, 0.1]);
    expect(at({ schedule: 'constant', value: 0.2, warmup: 3 }, 5)).toEqual([0.05, 0.1, 0.15, 0.2, 0.2]);
    expect(at({ schedule: 'linear', initial: 0.4, final: 0.1 }, 4)).toEqual([0.4, 0.3, 0.2, 0.1]);
    expect(at({ schedule: 'cosine', initial: 0.3, final: 0.1 }, 5)).toEqual([0.3, Number((0.1 + 0.1 * (1 + Math.SQRT1_2)).toFixed(12)), 0.2, Number((0.1 + 0.1 * (1 - Math.SQRT1_2)).toFixed(12)), 0.1]);
    expect(at({ schedule: 'step', initial: 0.8, factor: 0.5, every: 2, final: 0.15 }, 8)).toEqual([0.8, 0.8, 0.4, 0.4, 0.2, 0.2, 0.15, 0.15]);
    // the warm-up rises to the start, then the decay runs over the iterations left
    expect(at({ schedule: 'linear', initial: 0.4, final: 0.2, warmup: 1 }, 4)).toEqual([0.2, 0.4, 0.3, 0.2]);
    // a one-iteration run sits at the start
    expect(at({ schedule: 'cosine', initial: 0.3, final: 0.1 }, 1)).toEqual([0.3]);
    expect(esAt({ sigma: 0.02, alpha: Schedule.parse({ schedule: 'linear', initial: 1, final: 0 }) }, 1, 3)).toEqual({ sigma: 0.02, alpha: 0.5 });
  });

  it('refuses bad schedules with the field path', () => {
    const bad = (es: Record<string, unknown>) => {
      const r = RunConfig.safeParse({ ...baseConfig, es: { ...baseConfig.es, ...es } });
      expect(r.success).toBe(false);
      return r.error!.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    };
    expect(bad({ sigma: { schedule: 'cosine', initial: 0.05, final: 0 } })).toContain('es.sigma.final: σ must stay above 0');
    expect(bad({ alpha: { schedule: 'step', initial: 0.1, factor: 2, every: 1 } })).toMatch(/es\.alpha\.factor/);
    expect(bad({ alpha: { schedule: 'exponential', initial: 0.1 } })).toMatch(/es\.alpha/);
    expect(bad({ sigma: { schedule: 'linear', initial: 0.1, final: 0.01, floor: 0.01 } })).toMatch(/es\.sigma/);
    expect(bad({ sigma: -0.1 })).toMatch(/es\.sigma/);
    // a decaying α may reach 0
    expect(RunConfig.safeParse({ ...baseConfig, es: { ...baseConfig.es, alpha: { schedule: 'linear', initial: 0.1, final: 0 } } }).success).toBe(true);
  });

  it("puts each iteration's σ in its manifest and metrics row and its α in the log, as the schedules give them", async () => {
    const store = join(root, 'store');
    const config = join(root, 'config.json');
    const es = { population: 6, sigma: { schedule: 'step', initial: 0.08, factor: 0.5, every: 1, final: 0.02 }, alpha: { schedule: 'cosine', initial: 0.06, final: 0.01, warmup: 1 } };
    writeFileSync(config, JSON.stringify({ ...baseConfig, es, iterations: 4 }));
    const out = await esopt(['train', '--config', config, '--run', 'scheduled', '--store', store, '--json']);
    expect(out.code, out.stderr).toBe(0);
    const iterations = join(store, 'runs/scheduled/iterations');
    const manifests = readdirSync(iterations).sort().slice(0, 4).map((k) => JSON.parse(readFileSync(join(iterations, k, 'manifest.json'), 'utf8')) as { sigma: number });
    expect(manifests.map((m) => m.sigma)).toEqual([0.08, 0.04, 0.02, 0.02]);
    const log = readFileSync(join(store, 'runs/scheduled/log.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { sigma: number; alpha: number });
    const parsed = RunConfig.parse({ ...baseConfig, es, iterations: 4 });
    expect(log.map((e) => [e.sigma, e.alpha])).toEqual([0, 1, 2, 3].map((k) => [esAt(parsed.es, k, 4).sigma, esAt(parsed.es, k, 4).alpha]));
    expect(log.map((e) => Number(e.alpha.toFixed(12)))).toEqual([0.03, 0.06, Number((0.01 + 0.025).toFixed(12)), 0.01]);
    const rows = readdirSync(join(store, 'runs/scheduled/metrics')).sort().map((f) => JSON.parse(readFileSync(join(store, 'runs/scheduled/metrics', f), 'utf8')) as { sigma: number; alpha: number });
    expect(rows.map((r) => [r.sigma, r.alpha])).toEqual(log.map((e) => [e.sigma, e.alpha]));
  }, 60_000);
});
