/**
 * The draft mixer that version 1 of the device noise definition (shared/device-noise.ts) replaced, kept to
 * compare against: add-shift x + ⌊x/2^s⌋ and murmur3's multipliers, six rounds, h1 mixed from h0 + k1 (so h0
 * does not depend on k1). Almost linear mod 2^32; no run ever used it.
 */
import { GOLDEN } from '../shared/device-noise.ts';

const ROUNDS = [[16, 0x85ebca6b], [13, 0xc2b2ae35], [16, 0x27d4eb2f], [16, 0x85ebca6b], [13, 0xc2b2ae35], [16, 0x27d4eb2f]] as const;

function mix(x: number): number {
  for (const [shift, m] of ROUNDS) x = Math.imul((x + (x >>> shift)) >>> 0, m) >>> 0;
  return x;
}

/** The draft's two mixed words of element `index` of a block with keys (k0, k1). */
export function draftDeviceNoiseWords(index: number, k0: number, k1: number): [number, number] {
  const h0 = mix((Math.imul(index, GOLDEN) + k0) >>> 0);
  return [h0, mix((h0 + k1) >>> 0)];
}
