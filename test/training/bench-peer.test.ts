import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { options, run, weightBytesPerStep } from '../../trainer/studies/bench/peer.ts';
import { buildPreset } from '../../trainer/engine/model/open-model.ts';
import { writePresetDir } from '../../trainer/engine/model/preset-dir.ts';
import { parameterCount } from '../../trainer/engine/model/weights.ts';

const dir = mkdtempSync(join(tmpdir(), 'esopt-peer-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('esopt bench peer', () => {
  it('decodes the same export as transformers.js token for token, and reports both rates and the bandwidth limit', async () => {
    writePresetDir(dir, 'tiny', 3);
    const out = await run(options.parse({ model: dir, batch: 3, promptTokens: 5, newTokens: 7, repeats: 1, bandwidthMib: 64 }), () => {});
    // greedy decoding of one graph by two engines: any difference in feeds, masks or positions shows here
    expect(out.rows_with_equal_tokens).toBe(3);
    // the preset's attention is recognised: the fused graph the engine runs decodes the same tokens too
    expect(out.fused).toBe(true);
    expect(out.fused_rows_with_equal_tokens).toBe(3);
    expect(out.esopt_fused_tokens_per_s).toBeGreaterThan(0);
    expect(out.fused_ratio).toBeCloseTo(out.esopt_fused_tokens_per_s! / out.transformers_js_tokens_per_s, 10);
    expect(out.esopt_tokens_per_s).toBeGreaterThan(0);
    expect(out.transformers_js_tokens_per_s).toBeGreaterThan(0);
    expect(out.ratio).toBeCloseTo(out.esopt_tokens_per_s / out.transformers_js_tokens_per_s, 10);
    expect(out.read_bandwidth_bytes_per_s).toBeGreaterThan(1e8);
    expect(out.limit_tokens_per_s).toBeCloseTo((3 * out.read_bandwidth_bytes_per_s) / (out.weight_bytes_per_step + out.kv_bytes_per_step), 6);
  }, 60_000);

  it('counts every matrix a decode step reads once, and not the embedding table it only gathers rows from', () => {
    const model = buildPreset('tiny', 0);
    const embedding = model.weights.find((w) => /embed/.test(w.name));
    expect(embedding).toBeDefined();
    const theta = parameterCount(model.weights) * 4;
    expect(weightBytesPerStep(model.graph, new Set(model.weights.map((w) => w.name)))).toBe(theta - embedding!.dims.reduce((a, d) => a * d, 1) * 4);
  });

  it('refuses a directory without model.onnx, naming it', async () => {
    await expect(run(options.parse({ model: tmpdir(), repeats: 1 }), () => {})).rejects.toThrow(/model\.onnx|config/);
  });
});
