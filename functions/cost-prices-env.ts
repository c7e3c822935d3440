/**
 * The prices a deployed function charges with, from ESOPT_COST_PRICES (JSON of CostPrices): the stack
 * sets it (sst.config.ts, from the box's measured decode rate), so a function never guesses a measurement.
 */
import { CostPrices } from '../shared/cost.ts';

export const COST_PRICES_ENV = 'ESOPT_COST_PRICES';

export function pricesFromEnv(value: string | undefined): CostPrices {
  if (value === undefined || value === '') throw new Error(`${COST_PRICES_ENV} is not set: the stack sets it (sst.config.ts); a local harness passes prices itself`);
  let json: unknown;
  try {
    json = JSON.parse(value);
  } catch (err) {
    throw new Error(`${COST_PRICES_ENV} is not JSON: ${(err as Error).message}`);
  }
  const parsed = CostPrices.safeParse(json);
  if (!parsed.success) throw new Error(`${COST_PRICES_ENV}: ${parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`);
  return parsed.data;
}
