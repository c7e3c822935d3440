/**
 * Whether onnxruntime's WebGPU provider finds an adapter here (Mesa's lavapipe on this VM and in CI, a GPU
 * elsewhere): null when it does, else why not. The WebGPU tests skip, saying so in their titles, without one.
 */
import * as ort from 'onnxruntime-node';
import { buildPreset } from '../../../trainer/engine/model/open-model.ts';
import { sessionOptionsFor } from '../../../trainer/engine/model/sessions.ts';
import { encodeModel } from '../../../trainer/engine/onnx/proto.ts';

export const noAdapter: string | null = await ort.InferenceSession.create(encodeModel(buildPreset('tiny', 0).graph), sessionOptionsFor({ executionProvider: 'webgpu' }))
  .then(async (s) => (await s.release(), null))
  .catch((err: Error) => {
    if (/Failed to get a WebGPU adapter|No supported adapters/.test(err.message)) return err.message.slice(err.message.indexOf('Failed to get'));
    throw err;
  });

/** What a skipped test's title adds. */
export const skipped = noAdapter ? ` — SKIPPED, no Vulkan adapter here (${noAdapter})` : '';
