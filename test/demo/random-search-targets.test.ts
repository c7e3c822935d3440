import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { RunConfig } from '../../shared/schemas/index.ts';
import { hashTheta } from '../../shared/theta-hash.ts';
import { loadEnvironment } from '../../environments/index.ts';
import { openStudyRun } from '../../trainer/assembly/run.ts';
import { randomSearch } from '../../trainer/studies/demo/random-search.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-rs-targets-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const demo = JSON.parse(readFileSync(new URL('../../configs/demo.json', import.meta.url), 'utf8'));

async function searchWith(targets: unknown) {
  const config = RunConfig.parse({
    ...demo,
    environment: { ...demo.environment, options: { ...demo.environment.options, blanks: 3 } },
    tasks: { seed: 1, trainPerIteration: 1, evalCount: 2 },
    es: { ...demo.es, population: 2 },
    iterations: 1,
    evalInterval: 1,
    workers: 1,
    targets,
  });
  const environment = await loadEnvironment('sudoku');
  const options = environment.optionsSchema.parse(config.environment.options);
  const served = await openStudyRun(config, join(root, String(Math.random())));
  try {
    const before = served.engine.segments().map((s) => ({ name: s.name, hash: hashTheta([s]) }));
    const rs = await randomSearch({
      run: 'rs',
      config,
      store: served.site.store,
      fanout: served.site.fanout,
      engine: served.engine,
      population: served.server.service,
      policy: { baseUrl: `${served.server.url}/v1` },
      environment,
      evalTasks: environment.sampleTasks('eval', 2, 1, options).map((t) => ({ id: t.id, task: t.task })),
    });
    const after = served.engine.segments().map((s) => ({ name: s.name, hash: hashTheta([s]) }));
    return { rs, changed: after.filter((s, i) => s.hash !== before[i].hash).map((s) => s.name) };
  } finally {
    await served.close();
  }
}

describe('random search with targets', () => {
  it('moves only the targeted tensors, as the ES update does (all of them without targets)', async () => {
    const targeted = await searchWith({ include: ['q_proj'] });
    expect(targeted.changed).toEqual(['model.layers.0.self_attn.q_proj.weight', 'model.layers.1.self_attn.q_proj.weight']);
    const all = await searchWith('all');
    expect(all.changed.length).toBeGreaterThan(10);
  }, 60_000);
});
