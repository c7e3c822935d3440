import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { FullModeWeights } from '../../shared/schemas/index.ts';
import { machineInfo } from './measure.ts';
import { flag, parseFlags } from '../command/args.ts';
import type { Command } from '../command/command.ts';

const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);
const probe = fileURLToPath(new URL('./memory-probe.ts', import.meta.url));

function runChild(options: Record<string, unknown>): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', probe, JSON.stringify(options)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`memory probe (${String(options.workload)}) exited ${code}: ${err.trim().split('\n').slice(-5).join('\n')}`));
      const parsed = z.object({ maxRssKiB: z.number() }).safeParse(JSON.parse(out.trim().split('\n').pop() ?? '{}'));
      if (!parsed.success) return reject(new Error(`memory probe printed no peak RSS: ${out}`));
      resolve(parsed.data.maxRssKiB);
    });
  });
}

export const command: Command = {
  name: 'bench memory',
  usage: 'esopt bench memory [--mode full|lowrank] [--model small|NAME|DIR] [--population 8] [--batch 4] [--prompt-tokens 32] [--new-tokens 32] [--iterations 3] [--switch-threads N] [--full-weights inputs|rebuild-session] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, {
      mode: { type: 'string', default: 'full' },
      model: { type: 'string', default: 'small' },
      population: { type: 'string', default: '8' },
      batch: { type: 'string', default: '4' },
      'prompt-tokens': { type: 'string', default: '32' },
      'new-tokens': { type: 'string', default: '32' },
      iterations: { type: 'string', default: '3' },
      'switch-threads': { type: 'string' },
      'full-weights': { type: 'string', default: 'inputs' },
    });
    const options = {
      mode: flag(p.values, 'mode', z.enum(['full', 'lowrank'])),
      model: flag(p.values, 'model', z.string().min(1)),
      population: flag(p.values, 'population', int(2, 1024).refine((n) => n % 2 === 0, 'must be even (antithetic pairs)')),
      batch: flag(p.values, 'batch', int(1, 256)),
      promptTokens: flag(p.values, 'prompt-tokens', int(1, 1024)),
      newTokens: flag(p.values, 'new-tokens', int(1, 1024)),
      iterations: flag(p.values, 'iterations', int(1, 100)),
      // full mode's switch threads (unset: the engine's default, one thread below 2^29 elements of θ)
      switchThreads: flag(p.values, 'switch-threads', int(1, 256).optional()),
      // full mode's weights (the engine's `fullModeWeights`): rebuild-session holds prepacked session copies beside θ
      fullModeWeights: flag(p.values, 'full-weights', FullModeWeights),
    };
    const log = (m: string) => { if (!p.json) io.stderr(m); };
    log(`child 1/2: generate only (${options.iterations} iterations × ${options.population} members' worth of calls)`);
    const generate = await runChild({ ...options, workload: 'generate' });
    log('child 2/2: train (perturb, generate, restore, update)');
    const train = await runChild({ ...options, workload: 'train' });
    const out = { ...options, train_peak_rss_mib: train / 1024, generate_peak_rss_mib: generate / 1024, ratio: train / generate, target: 1.05, machine: machineInfo() };
    if (p.json) io.stdout(JSON.stringify(out, null, 2));
    else io.stdout(`peak RSS train ${out.train_peak_rss_mib.toFixed(1)} MiB ÷ generate ${out.generate_peak_rss_mib.toFixed(1)} MiB = ratio ${out.ratio.toFixed(3)} (target ≤ 1.05)`);
    return 0;
  },
};
