import { ModelName } from '../../../shared/schemas/index.ts';
import { UsageError } from './usage-error.ts';

/** The one positional model name of `models show` and `models rm`, checked as a name. */
export function nameArgument(positionals: string[]): string {
  if (positionals.length !== 1) throw new UsageError('give exactly one model name');
  const r = ModelName.safeParse(positionals[0]);
  if (!r.success) throw new UsageError(`not a valid model name: ${JSON.stringify(positionals[0])} (${r.error.issues[0]?.message})`);
  return r.data;
}
