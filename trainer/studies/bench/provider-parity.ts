/**
 * Greedy decoding on one execution provider against the CPU's, token for token, in each way an engine
 * serves θ (full mode with θ as inputs, full mode with rebuilt sessions, low-rank mode): the check that a
 * device provider computes the model, not merely runs. Greedy argmax can flip where two logits lie within
 * float rounding of each other, so a difference is reported with where it starts, never hidden. Rows
 * generate different lengths, so on the webgpu route finished rows leave the batch (on the device) while
 * others go on; `kvOnDevice: false` checks the host route instead. `full-device-noise` is full mode with
 * the run noise esopt-device-noise, whose rows are members beside the base (on webgpu θ stays on the device
 * and each member is made there; on the CPU the same noise perturbs θ in place).
 */
import type { ExecutionProvider } from '../../../shared/execution-provider.ts';
import type { LocalModelSpec } from '../../../shared/schemas/index.ts';
import { ask } from '../../../shared/es.ts';
import type { EngineOptions, GenerateRow, Population } from '../../engine/engine.ts';
import { openEngine } from '../../assembly/engine.ts';

export const PARITY_WAYS = ['full-inputs', 'full-rebuild-session', 'lowrank', 'full-device-noise'] as const;
export type ParityWay = (typeof PARITY_WAYS)[number];

export interface ParityWayResult {
  way: ParityWay;
  /** Every row's tokens equal the CPU's. */
  equal: boolean;
  /** Per row: how many leading tokens equal the CPU's (the row's length where it is equal). */
  matchingPrefix: number[];
  cpuMs: number;
  providerMs: number;
}

export interface ParityResult {
  provider: ExecutionProvider;
  rows: number;
  newTokens: number;
  /** Each row's length: newTokens, less a quarter of it for every second row, half for every third. */
  rowTokens: number[];
  kvOnDevice: boolean;
  equal: boolean;
  ways: ParityWayResult[];
}

const engineOptions = (way: ParityWay): Pick<EngineOptions, 'mode' | 'fullModeWeights' | 'noise'> =>
  way === 'lowrank' ? { mode: 'lowrank' } : way === 'full-device-noise' ? { mode: 'full', fullModeWeights: 'inputs', noise: 'esopt-device-noise' } : { mode: 'full', fullModeWeights: way === 'full-inputs' ? 'inputs' : 'rebuild-session' };

/** The population of the device-noise way's member rows: two antithetic pairs. */
const devicePopulation: Population = { runSeed: 3, iteration: 0, sigma: 0.05, rank: 1, noise: 'esopt-device-noise', members: ask({ population: 4, antithetic: true }) };

/** The device-noise way's rows are members (every row but each third, which stays the base). */
const withMembers = (rows: GenerateRow[]): GenerateRow[] => rows.map((r, k) => (k % 3 === 0 ? r : { ...r, member: { kind: 'member', iteration: 0, index: k % 4 } }));

const rowTokens = (rows: number, newTokens: number) => Array.from({ length: rows }, (_, k) => Math.max(1, newTokens - (k % 3) * Math.floor(newTokens / 4)));

/** `rows` greedy rows of 8 distinct prompt bytes each, rowTokens generated past EOS. */
function parityRows(rows: number, newTokens: number): GenerateRow[] {
  const lengths = rowTokens(rows, newTokens);
  return Array.from({ length: rows }, (_, k) => ({
    promptIds: Array.from({ length: 8 }, (_, i) => 3 + ((i * 7 * (k + 1) + k) % 250)),
    member: { kind: 'base' as const },
    sampling: { temperature: 0, topP: 1, topK: 0, seed: 0 },
    maxNewTokens: lengths[k],
    stop: [],
    ignoreEos: true,
  }));
}

async function decode(model: LocalModelSpec, provider: ExecutionProvider, way: ParityWay, rows: GenerateRow[], kvOnDevice: boolean): Promise<{ tokens: number[][]; ms: number }> {
  const engine = await openEngine({ model, executionProvider: provider, kvOnDevice, ...engineOptions(way) });
  try {
    if (way === 'full-device-noise') engine.setPopulation(devicePopulation);
    const t0 = performance.now();
    const out = await engine.generate(way === 'full-device-noise' ? withMembers(rows) : rows);
    return { tokens: out.map((o) => o.tokenIds), ms: performance.now() - t0 };
  } finally {
    await engine.close();
  }
}

export async function providerParity(o: { model: LocalModelSpec; provider: ExecutionProvider; rows: number; newTokens: number; ways?: readonly ParityWay[]; kvOnDevice?: boolean }): Promise<ParityResult> {
  const rows = parityRows(o.rows, o.newTokens);
  const lengths = rowTokens(o.rows, o.newTokens);
  const kvOnDevice = o.kvOnDevice ?? true;
  const ways: ParityWayResult[] = [];
  for (const way of o.ways ?? PARITY_WAYS) {
    const cpu = await decode(o.model, 'cpu', way, rows, kvOnDevice);
    const dev = await decode(o.model, o.provider, way, rows, kvOnDevice);
    const matchingPrefix = cpu.tokens.map((c, r) => {
      const d = dev.tokens[r];
      let n = 0;
      while (n < c.length && n < d.length && c[n] === d[n]) n++;
      return c.length === d.length && n === c.length ? lengths[r] : n;
    });
    ways.push({ way, equal: matchingPrefix.every((n, r) => n === lengths[r]), matchingPrefix, cpuMs: Math.round(cpu.ms), providerMs: Math.round(dev.ms) });
  }
  return { provider: o.provider, rows: o.rows, newTokens: o.newTokens, rowTokens: lengths, kvOnDevice, equal: ways.every((w) => w.equal), ways };
}
