/**
 * Parses `place <row> <col> <digit>` (1-based) out of free text: the first action found wins, so a
 * model may think aloud around it. Accepts "place 1 3 4", "Place(1, 3, 4)", "place r1 c3 4" and
 * "place row 1, col 3, digit 4". Range checks are the environment's job, not the parser's.
 */
export interface Placement {
  row: number;
  col: number;
  digit: number;
}

const SEP = String.raw`\s*[,;\s]\s*`;
const PLACE = new RegExp(
  String.raw`place\s*[(\[]?\s*(?:r(?:ow)?\s*[=:]?\s*)?(-?\d+)${SEP}(?:c(?:ol(?:umn)?)?\s*[=:]?\s*)?(-?\d+)${SEP}(?:(?:d(?:igit)?|v(?:alue)?|n(?:umber)?)\s*[=:]?\s*)?(-?\d+)`,
  'i',
);

export function parsePlacement(text: string): Placement | null {
  const m = PLACE.exec(text);
  if (!m) return null;
  return { row: Number(m[1]), col: Number(m[2]), digit: Number(m[3]) };
}

export function formatPlacement(p: Placement): string {
  return `place ${p.row} ${p.col} ${p.digit}`;
}
