/** The cost model's arithmetic and prices, and reading a deployed stack's description from the environment. */
import { describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CostPrices, costOfEpisodes, episodeCost } from '../../shared/cost.ts';
import { gpuSecondsPerToken, readThroughput, recordThroughput, type ThroughputMeasurement } from '../../shared/decode-throughput.ts';
import { cloudStackFromEnv, openCloudStack } from '../../trainer/assembly/cloud-stack.ts';
import { DEFAULT_THROUGHPUT, measuredPrices, throughputBasis } from '../../trainer/fanout/measured-prices.ts';
import { readStackPrices } from '../../trainer/cloud/box/stack-prices.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { keys } from '../../shared/keys.ts';

const DEFAULT_PRICES = measuredPrices();

describe('cost model', () => {
  it('prices Lambda GB-seconds (billed per started ms), the request share and the GPU-seconds of generated tokens', () => {
    const prices = CostPrices.parse({ lambdaUsdPerGbSecond: 0.00002, lambdaUsdPerRequest: 0.0000004, gpuUsdPerHour: 3.6, gpuSecondsPerToken: 0.01 });
    const cost = episodeCost({ durationMs: 1999.2, memoryMb: 2048, completionTokens: 100, episodesPerInvocation: 4 }, prices);
    expect(cost.lambdaGbSeconds).toBeCloseTo((2 * 2.0) / 4, 12); // 2 GB × 2.000 s, shared by 4 episodes running side by side
    expect(cost.gpuSeconds).toBeCloseTo(1, 12); // 100 tokens × 0.01 s
    expect(cost.usd).toBeCloseTo(1 * 0.00002 + 0.0000004 / 4 + (1 / 3600) * 3.6, 12);
  });

  it('charges local workers nothing for Lambda, and scales linearly with the number of episodes', () => {
    const local = episodeCost({ durationMs: 5000, memoryMb: 0, completionTokens: 10, episodesPerInvocation: 0 }, DEFAULT_PRICES);
    expect(local.lambdaGbSeconds).toBe(0);
    expect(local.usd).toBeCloseTo((10 * DEFAULT_PRICES.gpuSecondsPerToken * DEFAULT_PRICES.gpuUsdPerHour) / 3600, 15);
    const usage = { durationMs: 3000, memoryMb: 1024, completionTokens: 200, episodesPerInvocation: 1 };
    expect(costOfEpisodes(1000, usage, DEFAULT_PRICES).usd).toBeCloseTo(1000 * episodeCost(usage, DEFAULT_PRICES).usd, 12);
  });

  it("takes the GPU share from the trainer's recorded decode rate, and docs/CLOUD.md's table is what the model computes", () => {
    const recorded = readThroughput('configs/decode-throughput.json');
    const entry = recorded.find((r) => r.instanceType === DEFAULT_THROUGHPUT.instanceType && r.model === DEFAULT_THROUGHPUT.model)!;
    expect(entry.command).toMatch(/^esopt bench server .*--record/);
    expect(DEFAULT_PRICES.gpuSecondsPerToken).toBe(1 / entry.tokensPerSecond);
    // The table's rows, from the inputs the page lists.
    const doc = readFileSync('docs/CLOUD.md', 'utf8');
    const rows: [RegExp, Parameters<typeof costOfEpisodes>[1]][] = [
      [/\| 9×9 sudoku, .*1 per invocation \| ([\d,]+) \| ([\d,]+) \| \*\*\$([\d.]+)\*\* \|/, { durationMs: 15_000, memoryMb: 1024, completionTokens: 204, episodesPerInvocation: 1 }],
      [/\| the same, 8 episodes per invocation \| ([\d,]+) \| ([\d,]+) \| \*\*\$([\d.]+)\*\* \|/, { durationMs: 15_000, memoryMb: 1024, completionTokens: 204, episodesPerInvocation: 8 }],
      [/\| web task, .* \| ([\d,]+) \| ([\d,]+) \| \*\*\$([\d.]+)\*\* \|/, { durationMs: 60_000, memoryMb: 2048, completionTokens: 800, episodesPerInvocation: 1 }],
    ];
    for (const [pattern, usage] of rows) {
      const m = pattern.exec(doc);
      expect(m, String(pattern)).not.toBeNull();
      const cost = costOfEpisodes(1000, usage, DEFAULT_PRICES);
      expect(Number(m![1].replaceAll(',', ''))).toBe(Math.round(cost.lambdaGbSeconds));
      expect(Number(m![2].replaceAll(',', ''))).toBe(Math.round(cost.gpuSeconds));
      expect(Number(m![3])).toBe(Math.round(cost.usd * 100) / 100);
    }
    expect(doc).toContain(`206.0 tokens/s`);
    expect(entry.tokensPerSecond.toFixed(1)).toBe('206.0');
  });

  it("prices a box by its own instance type's measurement when recorded, else by the default's, and says it fell back", () => {
    expect(throughputBasis('local-cpu')).toEqual({ instanceType: 'local-cpu', fallback: false });
    expect(throughputBasis('g5.xlarge')).toEqual({ ...DEFAULT_THROUGHPUT, fallback: true });
    expect(throughputBasis()).toEqual({ ...DEFAULT_THROUGHPUT, fallback: false });
    const overridden = measuredPrices({ gpuUsdPerHour: 2, gpuSecondsPerToken: 0.5 }, 'g5.xlarge');
    expect(overridden).toMatchObject({ gpuUsdPerHour: 2, gpuSecondsPerToken: 0.5, lambdaUsdPerRequest: 0.0000002 });
    expect(() => measuredPrices({ gpuUsdPerHour: -1 })).toThrow(/gpuUsdPerHour/);
  });

  it("reads the stack's prices where its deploy wrote them, nothing where none did, and names a bad field", async () => {
    const store = new FsObjectStore(mkdtempSync(join(tmpdir(), 'esopt-prices-')));
    expect(await readStackPrices(store)).toBeUndefined();
    const prices = measuredPrices({ gpuUsdPerHour: 3 });
    await store.put(keys.stackPrices(), JSON.stringify(prices));
    expect(await readStackPrices(store)).toEqual(prices);
    await store.put(keys.stackPrices(), JSON.stringify({ ...prices, gpuSecondsPerToken: 'fast' }));
    await expect(readStackPrices(store)).rejects.toThrow(/stack\/prices\.json is not CostPrices: gpuSecondsPerToken/);
  });

  it('records a measurement per (instance type, provider, model), and names what is missing', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'esopt-tput-')), 'tput.json');
    const m = (instanceType: string, tokensPerSecond: number): ThroughputMeasurement => ({ instanceType, provider: 'cuda', model: 'm', concurrency: 32, maxTokens: 32, tokensPerSecond, measuredAt: new Date().toISOString(), command: 'esopt bench server', machine: 'x' });
    recordThroughput(file, m('g5.xlarge', 400));
    recordThroughput(file, m('g6.xlarge', 500));
    const records = recordThroughput(file, m('g5.xlarge', 800));
    expect(records.map((r) => [r.instanceType, r.tokensPerSecond])).toEqual([['g6.xlarge', 500], ['g5.xlarge', 800]]);
    expect(gpuSecondsPerToken(readThroughput(file), 'g5.xlarge')).toBe(1 / 800);
    expect(() => gpuSecondsPerToken(records, 'p5.48xlarge')).toThrow(/no decode throughput recorded for p5\.48xlarge: run esopt bench server --record/);
  });

  it('rejects bad prices and usage with the field named', () => {
    expect(() => CostPrices.parse({ gpuUsdPerHour: -1 })).toThrow(/gpuUsdPerHour/);
    expect(() => CostPrices.parse({ gpuUsdPerHuor: 1 })).toThrow(/gpuUsdPerHuor/);
    expect(() => episodeCost({ durationMs: Number.NaN, memoryMb: 1, completionTokens: 0, episodesPerInvocation: 1 }, DEFAULT_PRICES)).toThrow(/durationMs/);
    // The GPU share is a measurement: prices without one are refused rather than guessed.
    expect(() => CostPrices.parse({})).toThrow(/gpuSecondsPerToken/);
  });
});

describe('cloud stack', () => {
  it('names what is missing, and opens the S3 store and Lambda fan-out of a complete one', async () => {
    expect(() => cloudStackFromEnv({ ESOPT_BUCKET: 'esopt-prod-runs' })).toThrow(/ESOPT_EPISODE_FUNCTION is not set/);
    const stack = cloudStackFromEnv({ ESOPT_BUCKET: 'esopt-prod-runs', ESOPT_EPISODE_FUNCTION: 'esopt-prod-Episode', AWS_REGION: 'eu-west-1', ESOPT_EPISODES_PER_INVOCATION: '4' });
    expect(stack).toEqual({ bucket: 'esopt-prod-runs', episodeFunction: 'esopt-prod-Episode', region: 'eu-west-1', invocationType: 'Event', episodesPerInvocation: 4 });
    const { store, fanout } = openCloudStack(stack);
    expect(store.config).toMatchObject({ bucket: 'esopt-prod-runs', region: 'eu-west-1', forcePathStyle: false });
    expect(fanout.options).toMatchObject({ functionName: 'esopt-prod-Episode', invocationType: 'Event', episodesPerInvocation: 4 });
    await fanout.close();
    store.destroy();
  });
});
