/**
 * θ's pieces (weight-pieces.ts) packed into the groups one run of the grouped device noise graph makes
 * (device-noise-graph.ts): consecutive pieces whose stream indices follow one another without a gap and
 * stay in one key block, at most `maxElements` elements a group (a piece longer than that is a group alone).
 * Only the pieces a population targets are grouped: an untargeted piece feeds θ's tensor, so a group
 * never spans one, and the gap it leaves in the stream ends the group before it.
 */
import { BLOCK } from '../../../shared/device-noise.ts';
import { MAX_NOISE_ELEMENTS } from './device-noise-graph.ts';
import type { WeightPiece } from './weight-pieces.ts';

/** The default most elements a group: it bounds the temporary tensors of the graph's run. */
export const DEFAULT_GROUP_ELEMENTS = 2 ** 24;

export interface NoiseGroup {
  /** Its pieces, in stream order. */
  pieces: WeightPiece[];
  /** The first piece's stream index, and the group's element count. */
  offset: number;
  count: number;
}

/** The groups of `pieces` (taken in order; each segment's list, or null for one the population skips). */
export function noiseGroups(pieces: ReadonlyArray<readonly WeightPiece[] | null>, maxElements = DEFAULT_GROUP_ELEMENTS): NoiseGroup[] {
  if (!Number.isInteger(maxElements) || maxElements < 1 || maxElements > MAX_NOISE_ELEMENTS) throw new RangeError(`deviceGroupElements must be an integer in [1, ${MAX_NOISE_ELEMENTS}], got ${maxElements}`);
  const groups: NoiseGroup[] = [];
  let open: NoiseGroup | null = null;
  for (const ps of pieces) {
    if (!ps) {
      open = null;
      continue;
    }
    for (const p of ps) {
      const joins = open && open.offset + open.count === p.offset && Math.floor(open.offset / BLOCK) === Math.floor(p.offset / BLOCK) && open.count + p.count <= maxElements;
      if (open && joins) {
        open.pieces.push(p);
        open.count += p.count;
      } else {
        open = { pieces: [p], offset: p.offset, count: p.count };
        groups.push(open);
      }
    }
  }
  return groups;
}
