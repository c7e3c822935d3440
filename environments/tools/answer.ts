/**
 * Is a final answer right? Numbers are compared as numbers (currency signs, units, thousands
 * separators and words around them are ignored; within 0.01, the precision the tasks ask for);
 * strings after trimming, lower-casing, collapsing spaces and dropping quotes and a final full stop.
 */
const TOLERANCE = 0.01;

function numberIn(value: string | number): number | null {
  if (typeof value === 'number') return value;
  const m = /-?\d[\d,]*(?:\.\d+)?|-?\.\d+/.exec(value.replace(/(\d),(\d{3})\b/g, '$1$2'));
  return m ? Number(m[0].replace(/,/g, '')) : null;
}

export function normaliseText(value: string | number): string {
  return String(value).toLowerCase().replace(/\s+/g, ' ').replace(/^[\s"'`]+|[\s"'`.]+$/g, '');
}

export function answerMatches(given: string | number, expected: string | number): boolean {
  if (typeof expected === 'number') {
    const n = numberIn(given);
    return n !== null && Math.abs(n - expected) <= TOLERANCE + 1e-9;
  }
  return normaliseText(given) === normaliseText(expected);
}
