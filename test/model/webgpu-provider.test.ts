import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { buildPreset } from '../../trainer/model/open-model.ts';
import { providerParity } from '../../trainer/bench/provider-parity.ts';
import { sessionOptionsFor } from '../../trainer/model/sessions.ts';
import { encodeModel } from '../../trainer/onnx/proto.ts';

// Dawn (inside onnxruntime-node) needs a Vulkan adapter; CI has none, a machine with lavapipe or a GPU
// driver does (docs/MODEL.md, "GPU"). Only "no adapter" skips: any other failure of the provider fails.
const noAdapter = await ort.InferenceSession.create(encodeModel(buildPreset('tiny', 0).graph), sessionOptionsFor({ executionProvider: 'webgpu' }))
  .then(async (s) => (await s.release(), null))
  .catch((err: Error) => {
    if (/Failed to get a WebGPU adapter|No supported adapters/.test(err.message)) return err.message.slice(err.message.indexOf('Failed to get'));
    throw err;
  });

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
