/**
 * The prices a deployed stack charges with, as its deploy wrote them to the bucket (sst.config.ts): the box
 * reads them at start, so its evaluation budgets price episodes exactly as the functions do.
 */
import { CostPrices } from '../../../shared/cost.ts';
import { keys } from '../../../shared/keys.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import { readJson } from '../../../shared/store/json.ts';

/** The stack's prices, or undefined where no deploy wrote them (a bucket outside the stack). */
export async function readStackPrices(store: Pick<ObjectStore, 'get'>): Promise<CostPrices | undefined> {
  const parsed = await readJson(store, keys.stackPrices(), { parse: (v) => CostPrices.safeParse(v) });
  if (parsed === null) return undefined;
  if (!parsed.success) throw new Error(`${keys.stackPrices()} is not CostPrices: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return parsed.data;
}
