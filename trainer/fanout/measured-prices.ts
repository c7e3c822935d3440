/**
 * The prices a deployment charges with: the cost model's list prices (shared/cost.ts) and the GPU share
 * from the trainer's own measured decode rate (configs/decode-throughput.json, recorded by
 * `esopt bench server --record`). shared/ holds the model and no measurement; the stack (sst.config.ts)
 * and the trainer's local wirings put the measurement in through here.
 */
import measured from '../../configs/decode-throughput.json' with { type: 'json' };
import { CostPrices } from '../../shared/cost.ts';
import { gpuSecondsPerToken, ThroughputRecords } from '../../shared/decode-throughput.ts';

/** The measurement used where the box's own is not recorded: a development CPU, the only one so far (docs/CLOUD.md). */
export const DEFAULT_THROUGHPUT = { instanceType: 'local-cpu', model: 'tiny' } as const;

const records = ThroughputRecords.parse(measured);

/** Which measurement prices an instance type: its own when recorded, else the default, and whether it fell back. */
export function throughputBasis(instanceType?: string): { instanceType: string; model?: string; fallback: boolean } {
  if (instanceType && records.some((r) => r.instanceType === instanceType)) return { instanceType, fallback: false };
  return { ...DEFAULT_THROUGHPUT, fallback: instanceType !== undefined && instanceType !== DEFAULT_THROUGHPUT.instanceType };
}

/**
 * Prices for a box of `instanceType` (unset: the default measurement): what `overrides` gives (any field of
 * CostPrices, e.g. from ESOPT_COST_PRICES), the list prices for the rest, and `gpuSecondsPerToken` from the
 * measurement unless given.
 */
export function measuredPrices(overrides: Record<string, unknown> = {}, instanceType?: string): CostPrices {
  const basis = throughputBasis(instanceType);
  return CostPrices.parse({ gpuSecondsPerToken: gpuSecondsPerToken(records, basis.instanceType, basis.model), ...overrides });
}
