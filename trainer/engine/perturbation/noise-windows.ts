/**
 * Walks θ's segments (laid out back to back in the member's ε stream) in chunk-aligned windows of ε,
 * so each noise chunk is generated exactly once however the tensors cut the stream.
 */
import type { ParameterSegment } from '../../../shared/es.ts';
import { CHUNK, fillNoise, type NoiseKey } from '../../../shared/noise.ts';

const WINDOW = CHUNK * 4;
const scratch = new Float64Array(WINDOW);

/** `visit(segmentIndex, from, eps, epsFrom, count)`: segments[segmentIndex].data[from + k] pairs with eps[epsFrom + k]. */
export function forEachNoiseWindow(
  segments: readonly ParameterSegment[],
  key: NoiseKey,
  visit: (segmentIndex: number, from: number, eps: Float64Array, epsFrom: number, count: number) => void,
): void {
  const ordered = segments
    .map((s, i) => ({ i, start: s.offset, end: s.offset + s.data.length }))
    .filter((o) => o.end > o.start)
    .sort((a, b) => a.start - b.start);
  let first = 0;
  let cursor = ordered.length ? ordered[0].start : 0; // stream position of the next unvisited element
  while (first < ordered.length) {
    cursor = Math.max(cursor, ordered[first].start);
    const start = Math.floor(cursor / WINDOW) * WINDOW;
    const end = start + WINDOW;
    fillNoise(scratch, key, start);
    for (let j = first; j < ordered.length && ordered[j].start < end; j++) {
      const o = ordered[j];
      const lo = Math.max(o.start, cursor);
      const hi = Math.min(o.end, end);
      if (hi > lo) visit(o.i, lo - o.start, scratch, lo - start, hi - lo);
    }
    cursor = end;
    while (first < ordered.length && ordered[first].end <= end) first++;
  }
}
