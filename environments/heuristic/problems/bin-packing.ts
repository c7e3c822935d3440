/**
 * Online bin packing (the FunSearch setting): items arrive one at a time and each goes into a bin at
 * once. The agent writes `priority(item, bins)`, scoring every bin the item fits in; the item goes into
 * the best one. Cost: bins used. Baseline: first-fit (the first open bin that fits).
 */
import type { SeededRandom } from '../../random.ts';
import { WrongReturnError, type HeuristicProblem } from '../problem.ts';

export interface BinPackingInstance {
  capacity: number;
  items: number[];
}

const CAPACITY = 100;
const ITEMS = 200;
/** Item sizes are uniform in [MIN_ITEM, MAX_ITEM]: a range where best-fit beats first-fit by about 1% on average. */
const MIN_ITEM = 15;
const MAX_ITEM = 75;

/** Packs with a chooser over the feasible bins (remaining capacities, a fresh bin last); returns bins used. */
async function pack(instance: BinPackingInstance, choose: (item: number, feasible: number[]) => Promise<number>): Promise<number> {
  const remaining: number[] = [];
  for (const item of instance.items) {
    const open = remaining.flatMap((r, i) => (r >= item ? [i] : []));
    const feasible = [...open.map((i) => remaining[i]), instance.capacity];
    const k = feasible.length === 1 ? 0 : await choose(item, feasible);
    if (k === open.length) remaining.push(instance.capacity - item);
    else remaining[open[k]] -= item;
  }
  return remaining.length;
}

/** Index of the largest score; the first wins a tie, so a constant priority is first-fit. */
function argmax(scores: number[]): number {
  let best = 0;
  for (let i = 1; i < scores.length; i++) if (scores[i] > scores[best]) best = i;
  return best;
}

export const binPacking: HeuristicProblem<BinPackingInstance> = {
  name: 'bin-packing',
  functionName: 'priority',
  baselineName: 'first-fit',
  costName: 'bins',
  statement: [
    `Online bin packing. ${ITEMS} items (integer sizes from ${MIN_ITEM} to ${MAX_ITEM}) arrive one at a time and must be placed at once into a bin of capacity ${CAPACITY}; the goal is to use as few bins as possible.`,
    'Write a JavaScript function `priority(item, bins)`:',
    '- `item` is the size of the arriving item (a number);',
    `- \`bins\` is an array of the remaining capacities of the bins the item fits in, in the order they were opened; the last entry is always a fresh, empty bin (${CAPACITY});`,
    '- return an array of numbers, one per bin: the item goes into the bin with the highest number (the first one on a tie).',
    'Returning the same number for every bin is first-fit. The score is the mean over the test instances of (first-fit bins / your bins): 1 equals first-fit, higher is better.',
  ].join('\n'),
  instances(random, count) {
    return Array.from({ length: count }, () => ({ capacity: CAPACITY, items: Array.from({ length: ITEMS }, () => random.range(MIN_ITEM, MAX_ITEM)) }));
  },
  async solve(instance, call) {
    const baselineCost = await pack(instance, async () => 0);
    let calls = 0;
    const cost = await pack(instance, async (item, feasible) => {
      calls++;
      const scores = await call([item, feasible]);
      if (!Array.isArray(scores) || scores.length !== feasible.length || !scores.every((s) => typeof s === 'number' && !Number.isNaN(s))) {
        const got = Array.isArray(scores) ? `an array of length ${scores.length} with ${scores.filter((s) => typeof s !== 'number' || Number.isNaN(s)).length} non-numbers` : typeof scores;
        throw new WrongReturnError(`priority(${item}, [${feasible.join(', ')}]) must return an array of ${feasible.length} numbers (no NaN), got ${got} (call ${calls})`);
      }
      return argmax(scores as number[]);
    });
    return { cost, baselineCost };
  },
  // Best-fit: the fullest bin that still takes the item.
  oracleSubmissions: ['function priority(item, bins) {\n  return bins.map((remaining) => item - remaining);\n}'],
  randomCode(random) {
    const [a, b, c] = [random.float() * 2 - 1, random.float() * 2 - 1, random.float() * 2 - 1].map((x) => x.toFixed(3));
    return `function priority(item, bins) {\n  return bins.map((remaining, i) => ${a} * remaining + ${b} * i + ${c} * (remaining - item) * (remaining - item) / 100);\n}`;
  },
};
