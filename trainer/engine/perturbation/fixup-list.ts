/**
 * The elements an exact perturbation saved (exact-perturbation.ts), stored compactly: they are 4–7 % of
 * θ's elements at σ = 1e-3, so as (index, value) pairs, 8 bytes each, they cost 9–13 % of θ's memory,
 * which "training memory = inference memory" cannot afford (under 2 % here, test/engine/fixup-list.test.ts). Each entry here is the gap from the previous
 * index and k = bits(θ) − bits(θ′) (mod 2³²), θ′ = fl32(t − c·ε) being what the restore rule computes
 * there: the restore writes bits(θ′) + k, θ bit for bit. Most gaps are under 32 and most k within ±4
 * (t is one binade above θ), so most entries take one byte: (gap << 3) | zigzag(k); any other is a 0 byte,
 * then gap and zigzag(k) as LEB128 varints.
 */
import type { FixupSink, SavedElements } from '../../../shared/noise.ts';

/** One segment's saved elements: `count` entries in `bytes`. */
export interface FixupList {
  bytes: Uint8Array;
  count: number;
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);
const bitsOf = (x: number): number => ((f32[0] = x), u32[0]);
const fromBits = (b: number): number => ((u32[0] = b), f32[0]);

/** A new empty list (each its own buffer: lists are transferred between threads, which detaches them). */
export function emptyFixups(): FixupList {
  return { bytes: new Uint8Array(0), count: 0 };
}

export class FixupWriter implements FixupSink {
  private bytes = new Uint8Array(64);
  private length = 0;
  private count = 0;
  private last = -1;

  /** θ[index] was `before`; the restore rule will compute `restored` there. Indices come in ascending order. */
  push(index: number, before: number, restored: number): void {
    const gap = index - this.last;
    if (gap < 1) throw new RangeError(`fix-up indices must ascend: ${index} after ${this.last}`);
    const k = (bitsOf(before) - bitsOf(restored)) | 0;
    const zz = ((k << 1) ^ (k >> 31)) >>> 0;
    this.reserve(11);
    if (gap < 32 && zz < 8) this.bytes[this.length++] = (gap << 3) | zz;
    else {
      this.bytes[this.length++] = 0;
      this.varint(gap);
      this.varint(zz);
    }
    this.last = index;
    this.count++;
  }

  append(index: Int32Array, before: Float32Array, restored: Float32Array): void {
    for (let j = 0; j < index.length; j++) this.push(index[j], before[j], restored[j]);
  }

  /** The list, in a buffer of exactly its size. */
  finish(): FixupList {
    return { bytes: this.bytes.slice(0, this.length), count: this.count };
  }

  private varint(v: number): void {
    while (v >= 0x80) {
      this.bytes[this.length++] = (v & 0x7f) | 0x80;
      v = Math.floor(v / 128);
    }
    this.bytes[this.length++] = v;
  }

  private reserve(extra: number): void {
    if (this.length + extra <= this.bytes.length) return;
    const grown = new Uint8Array(Math.max(this.bytes.length * 2, this.length + extra));
    grown.set(this.bytes.subarray(0, this.length));
    this.bytes = grown;
  }
}

/** Reads a list front to back: `index` is the next saved element's, `take(θ′)` gives its θ and moves on. */
export class FixupReader implements SavedElements {
  index = Infinity;
  /** k of the entry at `index`. */
  delta = 0;
  private pos = 0;
  private read = 0;

  constructor(private readonly list: FixupList) {
    this.advance(-1);
  }

  take(restored: number): number {
    const value = fromBits((bitsOf(restored) + this.delta) >>> 0);
    this.advance(this.index);
    return value;
  }

  private advance(last: number): void {
    if (this.read === this.list.count) {
      this.index = Infinity;
      return;
    }
    const b = this.list.bytes[this.pos++];
    let gap: number;
    let zz: number;
    if (b !== 0) {
      gap = b >> 3;
      zz = b & 7;
    } else {
      gap = this.varint();
      zz = this.varint();
    }
    this.index = last + gap;
    this.delta = (zz >>> 1) ^ -(zz & 1);
    this.read++;
  }

  private varint(): number {
    let v = 0;
    let scale = 1;
    for (;;) {
      const b = this.list.bytes[this.pos++];
      v += (b & 0x7f) * scale;
      if (b < 0x80) return v;
      scale *= 128;
    }
  }
}

/** The entries as [index, θ′ → θ bit difference] pairs (for tests and checks). */
export function fixupEntries(list: FixupList): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  const r = new FixupReader(list);
  while (r.index !== Infinity) {
    out.push([r.index, r.delta]);
    r.take(0);
  }
  return out;
}
