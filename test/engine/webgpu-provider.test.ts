import { describe, expect, it } from 'vitest';
import { providerParity } from '../../trainer/studies/bench/provider-parity.ts';
import { noAdapter } from './helpers/webgpu-adapter.ts';

// Dawn (inside onnxruntime-node) needs a Vulkan adapter; CI has none, a machine with lavapipe or a GPU
// driver does (docs/MODEL.md, "GPU"). Only "no adapter" skips: any other failure of the provider fails.

describe('the webgpu execution provider', () => {
  it.skipIf(noAdapter !== null)(
    `decodes the tiny preset greedily token for token as the CPU does, KV caches on the device, in full (inputs, rebuild-session) and low-rank mode${noAdapter ? ` — SKIPPED, no Vulkan adapter here (${noAdapter})` : ''}`,
    async () => {
      const result = await providerParity({ model: { preset: 'tiny', seed: 0 }, provider: 'webgpu', rows: 4, newTokens: 12 });
      expect(result.rowTokens).toEqual([12, 9, 6, 12]);
      expect(result.ways.map((w) => [w.way, w.matchingPrefix])).toEqual(result.ways.map((w) => [w.way, [12, 9, 6, 12]]));
      expect(result.equal).toBe(true);
      expect(result.kvOnDevice).toBe(true);
    },
    60_000,
  );
});
