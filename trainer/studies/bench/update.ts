/** `esopt bench update`: the share of an iteration's wall time spent outside episodes (manifest, collection, update, checkpoint). */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { RunConfig } from '../../../shared/schemas/index.ts';
import { runEmbedded } from '../../assembly/run.ts';
import { silentProgress } from '../../training/loop/index.ts';
import type { Log } from './benchmark.ts';
import { machineInfo } from './measure.ts';
import { int, ModelSpecOption, Provider } from './options.ts';

export const options = z.object({
  model: ModelSpecOption('small'),
  population: int(2, 4096).default(32),
  iterations: int(1, 100).default(2),
  workers: int(1, 256).default(8),
  maxTokens: int(1, 4096).default(8),
  provider: Provider,
});

export async function run(o: z.output<typeof options>, log: Log) {
  const { model, population, iterations, workers, maxTokens, provider } = o;
  // Real episodes of the model through the server, kept short (one 4×4 sudoku move each) so the
  // measurement is cheap; every iteration writes a full checkpoint, the worst case for overhead.
  const config = RunConfig.parse({
    name: 'bench-update',
    environment: { name: 'sudoku', options: { size: 4, blanks: 1, slack: 0, shapedReward: true } },
    tasks: { seed: 0, trainPerIteration: 1, evalCount: 1 },
    model,
    es: { population, sigma: 0.01, alpha: 0.01 },
    generation: { temperature: 1, maxTokens },
    iterations,
    evalInterval: 1000,
    checkpointInterval: 1,
    workers,
    seed: 1,
  });
  const root = mkdtempSync(join(tmpdir(), 'esopt-bench-update-'));
  try {
    log(`${iterations} iteration(s) of G = ${population} with ${workers} workers …`);
    const { result } = await runEmbedded({ config, run: 'bench', storeRoot: root, progress: silentProgress, executionProvider: provider });
    const rows = result.rows;
    const sum = (f: (r: (typeof rows)[number]) => number) => rows.reduce((a, r) => a + f(r), 0);
    const total = sum((r) => r.durations.total);
    const episodes = sum((r) => r.durations.episodes);
    const phases = {
      manifest_ms: sum((r) => r.durations.manifest),
      episodes_ms: episodes,
      collect_ms: sum((r) => r.durations.collect),
      update_ms: sum((r) => r.durations.update),
      checkpoint_ms: sum((r) => r.durations.checkpoint),
      total_ms: total,
    };
    return {
      bench: 'update',
      model,
      provider,
      population,
      iterations,
      workers,
      maxTokens,
      episodes: sum((r) => r.counted + r.failed),
      failed: sum((r) => r.failed),
      phases,
      overhead_ratio: (total - episodes) / total,
      goal: '<= 0.05',
      machine: machineInfo(),
    };
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}
