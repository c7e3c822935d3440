/**
 * The demo's config: the ES run config (`configs/demo.json`, an ordinary RunConfig that `esopt train` and
 * `runs start` take too) and GRPO's own options for the gradient baseline (`configs/demo-grpo.json`).
 * GRPO's group must equal the ES population so that ES, GRPO and random search spend the same training
 * episodes (iterations × population × tasks per iteration).
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { RunConfig } from '../../../shared/schemas/index.ts';
import { GrpoOptions } from '../grpo/grpo.ts';

export const DemoConfig = z
  .object({
    run: RunConfig,
    grpo: GrpoOptions,
  })
  .strict()
  .superRefine((c, ctx) => {
    if (c.grpo.group !== c.run.es.population) ctx.addIssue({ code: 'custom', path: ['grpo', 'group'], message: `GRPO's group must equal the ES population (${c.run.es.population}) so both spend the same episodes` });
    if (!('dir' in c.run.model)) ctx.addIssue({ code: 'custom', path: ['run', 'model'], message: 'the demo needs a model export directory (model.dir): GRPO differentiates its weights' });
  });
export type DemoConfig = z.infer<typeof DemoConfig>;

function readJson(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(`cannot read ${path}: ${(err as Error).message}`);
  }
}

/** Reads and validates the run config and GRPO options files; the error names the files and the bad fields. */
export function readDemoConfig(runPath: string, grpoPath: string): DemoConfig {
  const r = DemoConfig.safeParse({ run: readJson(runPath), grpo: readJson(grpoPath) });
  if (!r.success) throw new Error(`${runPath} + ${grpoPath} are not a valid demo config (run = ${runPath}, grpo = ${grpoPath}):\n${z.prettifyError(r.error)}`);
  return r.data;
}
