import { z } from 'zod';
import { RunConfig } from '../../shared/schemas/index.ts';
import { machineInfo } from './measure.ts';
import { benchReplicas } from './replicas.ts';
import { flag, parseFlags } from '../command/args.ts';
import type { Command } from '../command/command.ts';
import { modelSpecFlag } from '../command/model-flags.ts';

export const command: Command = {
  name: 'bench replicas',
  usage: 'esopt bench replicas [--model DIR|small|tiny] [--mode full|lowrank] [--episodes 48] [--concurrency 8] [--rounds 3] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, {
      model: { type: 'string', default: 'models/sudoku-4x4-demo' },
      mode: { type: 'string', default: 'full' },
      episodes: { type: 'string', default: '48' },
      concurrency: { type: 'string', default: '8' },
      rounds: { type: 'string', default: '3' },
    });
    const config = RunConfig.parse({
      name: 'bench-replicas',
      environment: { name: 'sudoku', options: { size: 4, blanks: 6, invalidMove: 'waste', observation: 'next-cell', constrainActions: true } },
      tasks: { seed: 1 },
      model: modelSpecFlag(flag(p.values, 'model', z.string().min(1)), 0),
      mode: flag(p.values, 'mode', z.enum(['full', 'lowrank'])),
      es: { population: 16, sigma: 0.02, alpha: 0.02 },
      generation: { temperature: 0, maxTokens: 12 },
      // Iteration 0 is staged and never updated: the replicas serve its members for the whole measurement.
      iterations: 1,
      seed: 7,
    });
    const result = await benchReplicas({
      config,
      episodes: flag(p.values, 'episodes', z.coerce.number().int().min(2).max(100_000)),
      concurrency: flag(p.values, 'concurrency', z.coerce.number().int().min(1).max(1024)),
      rounds: flag(p.values, 'rounds', z.coerce.number().int().min(1).max(50)),
    });
    if (p.json) {
      io.stdout(JSON.stringify({ ...result, machine: machineInfo() }));
    } else {
      io.stdout(
        [
          `episodes/s, 1 replica:  ${result.episodes_per_s_1.toFixed(2)}`,
          `episodes/s, 2 replicas: ${result.episodes_per_s_2.toFixed(2)}`,
          `scaling (2 ÷ 1): ${result.scaling.toFixed(3)}${result.pinned ? ' (each replica pinned to one core)' : ' (taskset unavailable: replicas not pinned)'}`,
          `cost per 1,000 such episodes (shared/cost.ts defaults): $${result.usd_per_1000_episodes_1.toFixed(4)} with 1 replica, $${result.usd_per_1000_episodes_2.toFixed(4)} with 2`,
        ].join('\n'),
      );
    }
    return 0;
  },
};
