import { z } from 'zod';
import { runEpisode, type EpisodeResult } from '../../../environments/episode-runner.ts';
import { loadEnvironment, parseWith } from '../../../environments/index.ts';
import { makePolicy, parsePolicySpec } from '../../../environments/policies/spec.ts';
import { InstructionsName, Seed, type EpisodeInstructions } from '../../../shared/schemas/index.ts';
import { pinInstructionsName, resolveInstructions, UnknownInstructionsError } from '../../../shared/instructions-catalog.ts';
import { flag, parseFlags, type Parsed } from '../argv/args.ts';
import { storeFlags, storeFromFlags } from '../argv/store-flags.ts';
import type { Command } from '../argv/command.ts';
import { jsonFlag } from '../argv/json-flag.ts';
import { UsageError } from '../argv/usage-error.ts';

function render(result: EpisodeResult): string {
  const lines: string[] = [];
  for (const e of result.transcript) {
    if (e.kind === 'system') lines.push(`── system${e.instructions ? ` (instructions ${e.instructions.name}, manifest ${e.instructions.manifest})` : " (the environment's prompt)"}\n${e.text}`);
    else if (e.kind === 'action') lines.push(`── action ${e.step + 1}\n${e.text}${e.toolCalls ? `\ntool_calls: ${JSON.stringify(e.toolCalls)}` : ''}`);
    else lines.push(`── observation${e.reward !== undefined ? ` (reward ${e.reward})` : ''}\n${e.text}`);
  }
  lines.push(`reward ${result.reward} after ${result.steps} step(s) (${result.stopReason})${result.error ? `; error: ${result.error}` : ''}`);
  return lines.join('\n');
}

/** The pushed instructions --instructions names, pinned to the name's current manifest; none without the flag. */
async function instructionsOf(p: Parsed): Promise<EpisodeInstructions | undefined> {
  const name = flag(p.values, 'instructions', InstructionsName.optional());
  if (name === undefined) {
    if (p.values.store !== undefined || p.values.cloud) throw new UsageError('--store and --cloud are where --instructions are read from: give --instructions NAME');
    return undefined;
  }
  const chosen = storeFromFlags(p);
  try {
    return await resolveInstructions(chosen.store, await pinInstructionsName(chosen.store, { name }));
  } catch (err) {
    if (err instanceof UnknownInstructionsError) throw new UsageError(`--instructions: ${err.message} (in ${chosen.where})`);
    throw err;
  } finally {
    chosen.close();
  }
}

export const command: Command = {
  name: 'episode',
  usage:
    'esopt episode --env <name> --task <json|@file> --policy <oracle|random|replay:FILE|http:URL> [--seed S] [--options <json|@file>] ' +
    '[--model M] [--token-env VAR] [--max-tokens N] [--temperature T] [--timeout-ms MS] [--instructions NAME [--store DIR | --cloud]] [--json]\n' +
    '  --instructions NAME: play under pushed instructions (esopt instructions push), pinned to their current manifest; the system line names both',
  async run(argv, io) {
    const p = parseFlags(argv, {
      env: { type: 'string' },
      task: { type: 'string' },
      policy: { type: 'string' },
      seed: { type: 'string', default: '0' },
      options: { type: 'string' },
      model: { type: 'string', default: 'base' },
      'token-env': { type: 'string' },
      'max-tokens': { type: 'string', default: '64' },
      temperature: { type: 'string', default: '0' },
      'timeout-ms': { type: 'string', default: '60000' },
      instructions: { type: 'string' },
      ...storeFlags,
    });
    const name = flag(p.values, 'env', z.string().min(1));
    const seed = flag(p.values, 'seed', z.coerce.number().pipe(Seed));
    let spec;
    try {
      spec = parsePolicySpec(flag(p.values, 'policy', z.string().min(1)));
    } catch (err) {
      throw new UsageError(`--policy: ${(err as Error).message}`);
    }
    const tokenEnv = flag(p.values, 'token-env', z.string().regex(/^[A-Z_][A-Z0-9_]*$/, 'must be an environment variable name').optional());
    const token = tokenEnv ? process.env[tokenEnv] : undefined;
    if (tokenEnv && !token) throw new UsageError(`--token-env: environment variable ${tokenEnv} is not set`);
    const http = {
      model: flag(p.values, 'model', z.string().min(1).max(200)),
      maxTokens: flag(p.values, 'max-tokens', z.coerce.number().int().min(1).max(32_768)),
      temperature: flag(p.values, 'temperature', z.coerce.number().min(0).max(5)),
      timeoutMs: flag(p.values, 'timeout-ms', z.coerce.number().int().min(1).max(3_600_000)),
      ...(token ? { token } : {}),
    };

    let definition;
    try {
      definition = await loadEnvironment(name);
    } catch (err) {
      throw new UsageError(`--env: ${(err as Error).message}`);
    }
    let task: unknown;
    let options: unknown;
    try {
      task = parseWith(definition.taskSchema, jsonFlag(p.values, 'task'), `--task for ${name}`);
      options = parseWith(definition.optionsSchema, jsonFlag(p.values, 'options', {}), `--options for ${name}`);
    } catch (err) {
      if (err instanceof UsageError) throw err;
      throw new UsageError((err as Error).message);
    }
    const instructions = await instructionsOf(p);
    const policy = await makePolicy(spec, { definition, task, options, seed, http });
    const result = await runEpisode({ definition, task, options, policy, seed, ...(instructions ? { instructions } : {}) });
    io.stdout(p.json ? JSON.stringify(result) : render(result));
    return result.error === null ? 0 : 1;
  },
};
