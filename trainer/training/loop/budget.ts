/**
 * A run's spending limits (RunConfig.budget): what it has spent, row by row, and whether the next iteration
 * may start. Like an evaluation's budget, the check looks ahead — the next iteration is taken to cost what
 * the last one did — so a run stops before it passes a limit, not after.
 */
import type { MetricsRow, RunConfig } from '../../../shared/schemas/index.ts';

export type Spent = NonNullable<MetricsRow['spent']>;

export const NOTHING_SPENT: Spent = { usd: 0, episodes: 0, wallMs: 0 };

/** The spend after `row`, from the spend before it: its cost, its episodes played (counted or failed), its wall time. */
export function spentAfter(before: Spent, row: Pick<MetricsRow, 'cost' | 'counted' | 'failed' | 'durations'>): Spent {
  return { usd: before.usd + row.cost.usd, episodes: before.episodes + row.counted + row.failed, wallMs: before.wallMs + row.durations.total };
}

/** Why the next iteration may not start (a sentence), or null when every limit leaves room for one like the last. */
export function budgetStop(budget: RunConfig['budget'], spent: Spent, last: Spent): string | null {
  const usd = (x: number) => `$${x.toFixed(4)}`;
  if (budget.maxCostUsd !== undefined && spent.usd + last.usd > budget.maxCostUsd) {
    return `budget: ${usd(spent.usd)} spent, and another iteration (about ${usd(last.usd)}) would pass maxCostUsd ${usd(budget.maxCostUsd)}`;
  }
  if (budget.maxEpisodes !== undefined && spent.episodes + last.episodes > budget.maxEpisodes) {
    return `budget: ${spent.episodes} episodes played, and another iteration (${last.episodes}) would pass maxEpisodes ${budget.maxEpisodes}`;
  }
  if (budget.maxHours !== undefined && (spent.wallMs + last.wallMs) / 3_600_000 > budget.maxHours) {
    return `budget: ${(spent.wallMs / 3_600_000).toFixed(3)} h spent, and another iteration (about ${(last.wallMs / 3_600_000).toFixed(3)} h) would pass maxHours ${budget.maxHours}`;
  }
  return null;
}
