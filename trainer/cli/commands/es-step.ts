import { z } from 'zod';
import { ask, tell, applyDenseUpdate } from '../../../shared/es.ts';
import { noise } from '../../../shared/noise.ts';
import { Iteration, Seed } from '../../../shared/schemas/index.ts';
import { formatIssues } from '../../../shared/validation.ts';
import { parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { UsageError } from '../argv/usage-error.ts';

/** The stdin of `esopt es step`: θ, the ES settings and one reward per member (G = rewards.length). */
export const EsStepInput = z
  .object({
    theta: z.array(z.number().finite()).min(1).max(1_000_000),
    sigma: z.number().positive().finite(),
    alpha: z.number().positive().finite(),
    runSeed: Seed,
    iteration: Iteration,
    rewards: z.array(z.number().finite()).min(2).max(10_000),
    antithetic: z.boolean().default(false),
    rankShaping: z.boolean().default(false),
  })
  .strict();

export const command: Command = {
  name: 'es step',
  usage: 'echo \'{"theta":[…],"sigma":0.1,"alpha":0.01,"runSeed":1,"iteration":0,"rewards":[…],"antithetic":true,"rankShaping":false}\' | esopt es step [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, {});
    const raw = await io.readStdin();
    let json: unknown;
    try {
      json = JSON.parse(raw);
    } catch (err) {
      throw new UsageError(`stdin is not valid JSON: ${(err as Error).message}`);
    }
    const parsed = EsStepInput.safeParse(json);
    if (!parsed.success) throw new UsageError(`invalid input: ${formatIssues(parsed.error)}`);
    const input = parsed.data;
    const options = {
      population: input.rewards.length,
      antithetic: input.antithetic,
      alpha: input.alpha,
      shaping: input.rankShaping ? ('centered-rank' as const) : ('zscore' as const),
    };
    if (options.antithetic && options.population % 2 !== 0) {
      throw new UsageError(`invalid input: rewards: antithetic pairs need an even number of rewards, got ${options.population}`);
    }
    const members = ask(options);
    const result = tell(members, new Map(input.rewards.map((r, i) => [i, [r]])), options);
    const theta = Float32Array.from(input.theta);
    applyDenseUpdate([{ name: 'theta', data: theta, offset: 0 }], input.runSeed, input.iteration, result.coefficients);
    const epsilon = members.map((m) =>
      Array.from(noise({ runSeed: input.runSeed, iteration: input.iteration, member: m.noiseIndex }, theta.length), (v) => m.sign * v),
    );
    const out = { theta: Array.from(theta), epsilon, normalizedRewards: result.normalized };
    if (p.json) io.stdout(JSON.stringify(out));
    else {
      io.stdout(`G=${members.length}  normalised rewards: ${result.normalized.map((v) => v.toFixed(4)).join(' ')}`);
      io.stdout(`θ′ = [${out.theta.map((v) => v.toPrecision(7)).join(', ')}]`);
    }
    return 0;
  },
};
