import { describe, expect, it } from 'vitest';
import { philox4x32 } from '../../shared/philox.ts';

// Known-answer tests from Random123 (kat_vectors, philox4x32_10).
const KAT: Array<[number[], number[], string[]]> = [
  [[0, 0, 0, 0], [0, 0], ['6627e8d5', 'e169c58d', 'bc57ac4c', '9b00dbd8']],
  [[0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff], [0xffffffff, 0xffffffff], ['408f276d', '41c83b0e', 'a20bc7c6', '6d5451fd']],
  [[0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344], [0xa4093822, 0x299f31d0], ['d16cfe09', '94fdcceb', '5001e420', '24126ea1']],
];

describe('philox4x32-10', () => {
  it.each(KAT)('matches Random123 for counter %j key %j', (c, k, expected) => {
    const out = new Uint32Array(4);
    philox4x32(c[0], c[1], c[2], c[3], k[0], k[1], out);
    expect(Array.from(out, (x) => x.toString(16).padStart(8, '0'))).toEqual(expected);
  });
});
