/**
 * The webgpu route with its KV caches on the device (trainer/engine/generation/device-tensors.ts): greedy
 * tokens equal the CPU's in full mode (θ as inputs, rebuild-session) and low-rank mode, for base and
 * member rows of different lengths (finished rows leave the batch on the device) and for a second turn
 * served from the prefix cache (K/V kept from the device); after every step the same tensors are alive on
 * the device (that step's caches and the batch's uploaded inputs), none after a call; a one-token step
 * feeds no cache, weight or factor from the host and fetches only the logits. An fp16 export (fp16
 * caches) decodes as the CPU does too. Skipped, saying so, where Dawn finds no Vulkan adapter (CI).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ask } from '../../shared/es.ts';
import type { EngineOptions, GenerateRow, MemberSelector, Population, StepTransfer } from '../../trainer/engine/engine.ts';
import { providerParity } from '../../trainer/studies/bench/provider-parity.ts';
import { buildDecoder } from '../../trainer/engine/model/build-decoder.ts';
import { byteTokenizerConfig, byteTokenizerJson } from '../../trainer/engine/model/byte-tokenizer.ts';
import type { ModelConfig } from '../../trainer/engine/model/config.ts';
import { createOnnxEngine } from '../../trainer/engine/model/create-engine.ts';
import { saveModelDir } from '../../trainer/engine/model/model-dir.ts';
import type { OnnxEngine } from '../../trainer/engine/model/onnx-engine.ts';
import { buildPreset } from '../../trainer/engine/model/open-model.ts';
import { PRESETS } from '../../trainer/engine/model/presets.ts';
import { initDecoderWeights } from '../../trainer/engine/model/weights.ts';
import { toHalfExport } from './helpers/exporter-style.ts';
import { noAdapter, skipped } from './helpers/webgpu-adapter.ts';

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

const population: Population = { runSeed: 5, iteration: 2, sigma: 0.3, rank: 2, members: ask({ population: 4, antithetic: true }) };
const member = (index: number): MemberSelector => ({ kind: 'member', iteration: 2, index });
const LAYERS = 2; // tiny

/** Base and member rows, three of each, whose lengths differ (3 … 14 new tokens), so rows finish at different steps. */
function rows(prompts: number[][]): GenerateRow[] {
  return prompts.map((promptIds, k) => ({
    promptIds,
    member: k % 4 === 3 ? { kind: 'base' as const } : member(k % 4),
    sampling: { temperature: 0, topP: 1, topK: 0, seed: 0 },
    maxNewTokens: 3 + ((k * 5) % 12),
    stop: [],
    ignoreEos: true,
  }));
}

const firstPrompts = Array.from({ length: 12 }, (_, k) => Array.from({ length: 5 + k }, (_, i) => 3 + ((i * 11 * (k + 1) + k) % 250)));

interface Decoded {
  tokens: number[][];
  secondTurn: number[][];
  cachedTokens: number[];
  steps: StepTransfer[];
  liveAtSteps: number[];
  liveAfter: number;
}

async function decode(provider: 'cpu' | 'webgpu', way: Pick<EngineOptions, 'mode' | 'fullModeWeights'>, kvOnDevice = true): Promise<Decoded> {
  const steps: StepTransfer[] = [];
  const liveAtSteps: number[] = [];
  let engine: OnnxEngine | null = null;
  engine = await createOnnxEngine(buildPreset('tiny', 0), {
    model: { preset: 'tiny', seed: 0 },
    executionProvider: provider,
    kvOnDevice,
    ...way,
    onDecodeStep: (t) => {
      steps.push(t);
      liveAtSteps.push(engine!.liveDeviceTensors);
    },
  });
  try {
    engine.setPopulation(population);
    const first = await engine.generate(rows(firstPrompts));
    // the next turn extends each prompt with its completion: its prefix comes from the cache
    const second = await engine.generate(rows(firstPrompts.map((p, k) => [...p, ...first[k].tokenIds, 40 + k])));
    return { tokens: first.map((r) => r.tokenIds), secondTurn: second.map((r) => r.tokenIds), cachedTokens: second.map((r) => r.cachedTokens), steps, liveAtSteps, liveAfter: engine.liveDeviceTensors };
  } finally {
    await engine.close();
  }
}

const WAYS: Array<[string, Pick<EngineOptions, 'mode' | 'fullModeWeights'>]> = [
  ['full mode, θ as inputs', { mode: 'full', fullModeWeights: 'inputs' }],
  ['full mode, rebuild-session', { mode: 'full', fullModeWeights: 'rebuild-session' }],
  ['low-rank mode', { mode: 'lowrank' }],
];

describe('the webgpu route with the KV caches on the device', () => {
  for (const [name, way] of WAYS) {
    it.skipIf(noAdapter !== null)(`${name}: tokens equal the CPU's, two turns (prefix cache), rows leaving the batch, nothing leaked${skipped}`, async () => {
      const cpu = await decode('cpu', way);
      const gpu = await decode('webgpu', way);
      expect(gpu.tokens).toEqual(cpu.tokens);
      expect(gpu.secondTurn).toEqual(cpu.secondTurn);
      // the second turn did start from the cache, the same number of tokens on both
      expect(gpu.cachedTokens).toEqual(cpu.cachedTokens);
      expect(Math.min(...gpu.cachedTokens)).toBeGreaterThan(4);
      // after every step the same tensors are alive on the device: that step's caches (keys and values a
      // layer) and the batch's uploaded extra inputs (θ as inputs, factors), never more as steps go on...
      expect(new Set(gpu.liveAtSteps).size).toBe(1);
      expect(gpu.liveAtSteps[0]).toBeGreaterThanOrEqual(2 * LAYERS);
      if (way.fullModeWeights === 'rebuild-session') expect(gpu.liveAtSteps[0]).toBe(2 * LAYERS);
      // ...and none once a call is over
      expect(gpu.liveAfter).toBe(0);
      // finished rows left the batch: some step ran with fewer rows than the first
      const rowsPerStep = gpu.steps.map((s) => s.rows);
      expect(Math.min(...rowsPerStep)).toBeLessThan(rowsPerStep[0]);
      // no step fetches a cache; only a batch's prefill feeds one (its cached prefixes), never a one-token step
      for (const s of gpu.steps) expect(Object.keys(s.deviceToHost)).toEqual(['logits']);
      const decodeSteps = gpu.steps.filter((s) => s.hostToDevice.input_ids === s.rows * 8);
      expect(decodeSteps.length).toBeGreaterThan(20);
      // a one-token step feeds only its ids, positions and mask from the host (and the rows it keeps, after
      // some left): no cache, no weight, no factor
      for (const s of decodeSteps) expect(Object.keys(s.hostToDevice).filter((n) => !['input_ids', 'position_ids', 'attention_mask', 'rows', 'uploaded'].includes(n))).toEqual([]);
    }, 60_000);
  }

  it.skipIf(noAdapter !== null)(`an fp16 export (fp16 caches gathered and downloaded on the device): tokens equal the CPU's in every way${skipped}`, async () => {
    const c: ModelConfig = { ...PRESETS.tiny, torch_dtype: 'float16' };
    const dir = mkdtempSync(join(tmpdir(), 'esopt-webgpu-fp16-'));
    dirs.push(dir);
    saveModelDir(dir, { config: c, graph: toHalfExport(buildDecoder(c, initDecoderWeights(c, 0)), 'fp16'), tokenizerJson: byteTokenizerJson(), tokenizerConfig: byteTokenizerConfig() });
    const result = await providerParity({ model: { dir }, provider: 'webgpu', rows: 4, newTokens: 12 });
    expect(result.ways.map((w) => [w.way, w.matchingPrefix])).toEqual(result.ways.map((w) => [w.way, [12, 9, 6, 12]]));
  }, 60_000);

  it.skipIf(noAdapter !== null)(`kvOnDevice false is the host route: every step fetches every cache${skipped}`, async () => {
    const host = await decode('webgpu', { mode: 'lowrank' }, false);
    for (const s of host.steps) expect(Object.keys(s.deviceToHost).filter((n) => n.startsWith('present.')).length).toBe(2 * LAYERS);
    expect(host.liveAtSteps.every((n) => n === 0)).toBe(true);
  }, 60_000);
});
