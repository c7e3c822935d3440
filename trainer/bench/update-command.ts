import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { RunConfig } from '../../shared/schemas/index.ts';
import { machineInfo } from './measure.ts';
import { runEmbedded } from '../loop/embedded-run.ts';
import { silentProgress } from '../loop/progress.ts';
import { flag, parseFlags } from '../command/args.ts';
import type { Command } from '../command/command.ts';
import { modelSpecFlag } from '../command/model-flags.ts';

export const command: Command = {
  name: 'bench update',
  usage: 'esopt bench update [--model small|tiny|DIR] [--population 32] [--iterations 2] [--workers 8] [--max-tokens 8] [--provider cpu|cuda] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, {
      model: { type: 'string', default: 'small' },
      population: { type: 'string', default: '32' },
      iterations: { type: 'string', default: '2' },
      workers: { type: 'string', default: '8' },
      'max-tokens': { type: 'string', default: '8' },
      provider: { type: 'string', default: 'cpu' },
    });
    const model = modelSpecFlag(flag(p.values, 'model', z.string().min(1)), 0);
    const population = flag(p.values, 'population', z.coerce.number().int().min(2).max(4096));
    const iterations = flag(p.values, 'iterations', z.coerce.number().int().min(1).max(100));
    const workers = flag(p.values, 'workers', z.coerce.number().int().min(1).max(256));
    const maxTokens = flag(p.values, 'max-tokens', z.coerce.number().int().min(1).max(4096));
    const provider = flag(p.values, 'provider', z.enum(['cpu', 'cuda']));
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
      const out = {
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
        target: '<= 0.05',
        machine: machineInfo(),
      };
      io.stdout(
        p.json
          ? JSON.stringify(out)
          : `overhead_ratio ${out.overhead_ratio.toFixed(4)} (target ≤ 0.05): outside episodes ${(total - episodes).toFixed(0)} ms of ${total.toFixed(0)} ms over ${iterations} iteration(s), G = ${population} — ${JSON.stringify(phases)}`,
      );
      return 0;
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  },
};
