/**
 * The demo's config (`configs/demo.json`): the ES run config, and GRPO's own options for the gradient
 * baseline. GRPO's group must equal the ES population so that ES, GRPO and random search spend the same
 * training episodes (iterations × population × tasks per iteration).
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { RunConfig } from '../../shared/schemas/index.ts';
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

/** Reads and validates a demo config file; the error names the file and the bad fields. */
export function readDemoConfig(path: string): DemoConfig {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(`cannot read demo config ${path}: ${(err as Error).message}`);
  }
  const r = DemoConfig.safeParse(json);
  if (!r.success) throw new Error(`${path} is not a valid demo config:\n${z.prettifyError(r.error)}`);
  return r.data;
}
