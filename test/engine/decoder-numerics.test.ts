import { describe, expect, it } from 'vitest';
import { buildDecoder } from '../../trainer/engine/model/build-decoder.ts';
import { PRESETS } from '../../trainer/engine/model/presets.ts';
import { referenceForward } from '../../trainer/engine/model/reference-forward.ts';
import { initDecoderWeights, parameterCount } from '../../trainer/engine/model/weights.ts';
import { fullLogits, maxAbsDiff, session } from './onnx-helpers.ts';

const c = PRESETS.tiny;
const weights = initDecoderWeights(c, 11);

describe('built decoder numerics (tiny)', () => {
  it('has the preset sizes the issue asks for', () => {
    expect(parameterCount(weights)).toBeGreaterThan(100_000);
    expect(parameterCount(weights)).toBeLessThan(1_000_000);
    const small = initDecoderWeights(PRESETS.small, 0);
    expect(parameterCount(small)).toBeGreaterThan(10_000_000);
    expect(parameterCount(small)).toBeLessThan(30_000_000);
  });

  it('initialisation is deterministic by seed', () => {
    const again = initDecoderWeights(c, 11);
    const other = initDecoderWeights(c, 12);
    expect(again.map((w) => Array.from(w.data.subarray(0, 8)))).toEqual(weights.map((w) => Array.from(w.data.subarray(0, 8))));
    expect(Array.from(other[2].data.subarray(0, 8))).not.toEqual(Array.from(weights[2].data.subarray(0, 8)));
  });

  it('ONNX logits match the TypeScript reference forward within 1e-4', async () => {
    const s = await session(buildDecoder(c, weights));
    const ids = [256, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33, 257, 10, 3, 200];
    const [onnx] = await fullLogits(s, c, [ids]);
    const ref = referenceForward(c, weights, ids);
    let worst = 0;
    ids.forEach((_, j) => (worst = Math.max(worst, maxAbsDiff(onnx[j], ref[j]))));
    expect(worst).toBeLessThanOrEqual(1e-4);
    // and the logits are not trivially equal across positions (the check has teeth)
    expect(maxAbsDiff(onnx[0], onnx[5])).toBeGreaterThan(1e-3);
  });

  it('a left-padded row computes the same logits as the row alone', async () => {
    const s = await session(buildDecoder(c, weights));
    const short = [256, 5, 6, 7];
    const long = [256, 9, 8, 7, 6, 5, 4, 3, 2];
    const [alone] = await fullLogits(s, c, [short]);
    const [, padded] = await fullLogits(s, c, [long, short]);
    for (let j = 0; j < short.length; j++) expect(maxAbsDiff(alone[j], padded[j])).toBeLessThan(1e-5);
  });
});
