/**
 * `esopt bench memory`: peak RSS of a child process that trains (perturb, generate, restore, update) ÷ one
 * that only generates the same calls (memory-probe.ts), so neither sees the other's allocations. With
 * `--vs grpo` the second child takes GRPO steps (the same rollouts, then trainer/studies/grpo's gradient step and
 * Adam, its state float64 or with `--grpo-state float32` float32, with `--grpo-kl β` a KL term to a reference
 * copy of the base model) instead of generating only: GRPO's peak RSS ÷ ES's on the same model and calls.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { FullModeWeights } from '../../../shared/schemas/index.ts';
import type { LoraOptions } from '../../../shared/lora.ts';
import type { Log } from './benchmark.ts';
import { machineInfo } from './measure.ts';
import { int, ModelName } from './options.ts';
import { halfPrecisionCost } from '../../engine/model/half-theta.ts';
import { PRESETS } from '../../engine/model/presets.ts';
import { GRADIENT_DTYPES } from '../pretrain/gradient-kernels.ts';

const probe = fileURLToPath(new URL('./memory-probe.ts', import.meta.url));

export const options = z.object({
  mode: z.enum(['full', 'lowrank']).default('full'),
  model: ModelName('small'),
  population: int(2, 1024).refine((n) => n % 2 === 0, 'must be even (antithetic pairs)').default(8),
  batch: int(1, 256).default(4),
  promptTokens: int(1, 1024).default(32),
  newTokens: int(1, 1024).default(32),
  iterations: int(1, 100).default(3),
  // full mode's switch threads (unset: the engine's default)
  switchThreads: int(1, 256).optional(),
  // full mode's weights (the engine's `fullModeWeights`): rebuild-session holds prepacked session copies beside θ
  fullModeWeights: FullModeWeights.default('inputs'),
  // the workload ES is measured against: generation only (the default), or GRPO's step
  vs: z.enum(['generate', 'grpo']).default('generate'),
  // with --vs grpo: the precision of GRPO's gradients and Adam moments (trainer/studies/grpo's stateDtype)
  grpoState: z.enum(GRADIENT_DTYPES).default('float64'),
  // with --vs grpo: β of GRPO's KL term; above 0 the GRPO child also holds the base model as its reference
  grpoKl: z.coerce.number().min(0).finite().default(0),
});

/** What memory-probe.ts reads from its argument (its `Options`). */
export type ProbeOptions = Omit<z.output<typeof options>, 'vs' | 'mode' | 'grpoState' | 'grpoKl'> & {
  workload: 'train' | 'generate' | 'grpo' | 'serve';
  mode: 'full' | 'lowrank' | 'lora';
  /** The engine's prefix KV cache budget (absent: the engine's default). */
  prefixCacheBytes?: number;
  grpoState?: z.output<typeof options>['grpoState'];
  grpoKl?: number;
  /** LoRA mode: the adapters (shared/lora.ts's LoraOptions). */
  lora?: LoraOptions;
};

/** Runs one probe child and reads its peak RSS. */
export function runChild(probeOptions: ProbeOptions): Promise<{ maxRssKiB: number; differentiated?: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', probe, JSON.stringify(probeOptions)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`memory probe (${String(probeOptions.workload)}) exited ${code}: ${err.trim().split('\n').slice(-5).join('\n')}`));
      const parsed = z.object({ maxRssKiB: z.number(), differentiated: z.number().int().optional() }).safeParse(JSON.parse(out.trim().split('\n').pop() ?? '{}'));
      if (!parsed.success) return reject(new Error(`memory probe printed no peak RSS: ${out}`));
      // A GRPO step over no sequence would measure GRPO's state but not its forward and backward passes.
      if (parsed.data.differentiated === 0) return reject(new Error('the GRPO child differentiated no sequence (every advantage cancelled)'));
      resolve(parsed.data);
    });
  });
}

export async function run(all: z.output<typeof options>, log: Log) {
  const { vs, ...o } = all;
  if (vs === 'grpo') {
    log(`child 1/2: ES (${o.iterations} iterations: perturb, generate, restore, update)`);
    const es = (await runChild({ ...o, workload: 'train' })).maxRssKiB;
    log(`child 2/2: GRPO (${o.iterations} steps: the same rollouts, forward + backward, Adam; ${o.grpoState} state${o.grpoKl > 0 ? `, KL β ${o.grpoKl} to a reference model` : ''})`);
    // A GRPO child that fails (memory, an export the decoder gradient cannot read) still leaves ES's figure, and the reason.
    const grpo = await runChild({ ...o, workload: 'grpo' }).catch((err: Error) => err);
    const measured = !(grpo instanceof Error);
    return {
      ...o,
      vs,
      es_peak_rss_mib: es / 1024,
      grpo_peak_rss_mib: measured ? grpo.maxRssKiB / 1024 : null,
      grpo_over_es: measured ? grpo.maxRssKiB / es : null,
      // distinct turn sequences GRPO's steps ran forward and backward over
      grpo_sequences: measured ? (grpo.differentiated ?? null) : null,
      grpo_error: measured ? null : grpo.message,
      machine: machineInfo(),
    };
  }
  log(`child 1/2: generate only (${o.iterations} iterations × ${o.population} members' worth of calls)`);
  const generate = (await runChild({ ...o, workload: 'generate' })).maxRssKiB;
  log('child 2/2: train (perturb, generate, restore, update)');
  const train = (await runChild({ ...o, workload: 'train' })).maxRssKiB;
  return {
    ...o,
    vs,
    train_peak_rss_mib: train / 1024,
    generate_peak_rss_mib: generate / 1024,
    ratio: train / generate,
    goal: 1.05,
    // an fp16 export's θ is also held as fp32 masters, in both children (docs/MODEL.md, fp16 / bf16)
    fp16_theta: o.model in PRESETS ? null : halfPrecisionCost(o.model),
    machine: machineInfo(),
  };
}
