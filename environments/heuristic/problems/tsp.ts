/**
 * Constructive TSP: a tour is built city by city from a start city. The agent writes
 * `nextCity(current, unvisited, start)` returning the index of the city to visit next. Cost: the
 * length of the closed tour. Baseline: nearest neighbour.
 */
import type { SeededRandom } from '../../random.ts';
import { WrongReturnError, type HeuristicProblem } from '../problem.ts';

type Point = [number, number];

export interface TspInstance {
  cities: Point[];
}

const CITIES = 40;

function dist(a: Point, b: Point): number {
  return Math.hypot(a[0] - b[0], a[1] - b[1]);
}

/** Builds a tour from city 0 with a chooser over the unvisited cities; returns its length. */
async function tour(instance: TspInstance, choose: (current: Point, unvisited: Point[], start: Point) => Promise<number>): Promise<number> {
  const start = instance.cities[0];
  const unvisited = instance.cities.slice(1);
  let current = start;
  let length = 0;
  while (unvisited.length > 0) {
    const k = unvisited.length === 1 ? 0 : await choose(current, unvisited, start);
    const [next] = unvisited.splice(k, 1);
    length += dist(current, next);
    current = next;
  }
  return length + dist(current, start);
}

function nearest(current: Point, unvisited: Point[]): number {
  let best = 0;
  for (let i = 1; i < unvisited.length; i++) if (dist(current, unvisited[i]) < dist(current, unvisited[best])) best = i;
  return best;
}

export const tsp: HeuristicProblem<TspInstance> = {
  name: 'tsp',
  functionName: 'nextCity',
  baselineName: 'nearest-neighbour',
  costName: 'tour length',
  statement: [
    `Travelling salesman, built constructively. ${CITIES} cities lie in the square [0, 100]²; the tour starts at the start city, visits every city once and returns to the start; the goal is the shortest tour.`,
    'Write a JavaScript function `nextCity(current, unvisited, start)`:',
    '- `current` and `start` are points `[x, y]`; `unvisited` is a non-empty array of the points not visited yet;',
    '- return the index (an integer, 0 ≤ index < unvisited.length) of the city to go to next.',
    'The score is the mean over the test instances of (nearest-neighbour tour length / your tour length): 1 equals nearest neighbour, higher is better.',
  ].join('\n'),
  instances(random, count) {
    return Array.from({ length: count }, () => ({
      cities: Array.from({ length: CITIES }, (): Point => [Math.round(random.float() * 1000) / 10, Math.round(random.float() * 1000) / 10]),
    }));
  },
  async solve(instance, call) {
    const baselineCost = await tour(instance, async (current, unvisited) => nearest(current, unvisited));
    const cost = await tour(instance, async (current, unvisited, start) => {
      const k = await call([current, unvisited, start]);
      if (typeof k !== 'number' || !Number.isInteger(k) || k < 0 || k >= unvisited.length) {
        throw new WrongReturnError(`nextCity must return an integer index in [0, ${unvisited.length - 1}], got ${JSON.stringify(k)?.slice(0, 80) ?? typeof k}`);
      }
      return k;
    });
    return { cost, baselineCost };
  },
  // Nearest neighbour that saves the cities near the start for last, so the closing edge is short
  // (about 6% better than plain nearest neighbour on average, though not on every instance).
  oracleSubmissions: [
    [
    'function nextCity(current, unvisited, start) {',
    '  const d = (a, b) => Math.hypot(a[0] - b[0], a[1] - b[1]);',
    '  let best = 0, bestScore = Infinity;',
    '  unvisited.forEach((city, i) => {',
    '    const score = d(current, city) - 0.3 * d(city, start);',
    '    if (score < bestScore) { bestScore = score; best = i; }',
    '  });',
    '  return best;',
    '}',
    ].join('\n'),
    // Plain nearest neighbour as the fallback: the oracle never ends below the baseline.
    [
      'function nextCity(current, unvisited) {',
      '  const d = (a, b) => Math.hypot(a[0] - b[0], a[1] - b[1]);',
      '  let best = 0;',
      '  unvisited.forEach((city, i) => { if (d(current, city) < d(current, unvisited[best])) best = i; });',
      '  return best;',
      '}',
    ].join('\n'),
  ],
  randomCode(random) {
    const [a, b] = [random.float() * 2 - 1, random.float() * 2 - 1].map((x) => x.toFixed(3));
    return [
      'function nextCity(current, unvisited, start) {',
      '  const d = (p, q) => Math.hypot(p[0] - q[0], p[1] - q[1]);',
      '  let best = 0, bestScore = Infinity;',
      `  unvisited.forEach((c, i) => { const s = d(current, c) + ${a} * d(c, start) + ${b} * i; if (s < bestScore) { bestScore = s; best = i; } });`,
      '  return best;',
      '}',
    ].join('\n');
  },
};
