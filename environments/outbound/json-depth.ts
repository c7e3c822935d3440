/**
 * How deep a server's JSON nests, measured without recursion. JSON.parse reads any depth, but JSON.stringify,
 * structuredClone and every recursive walk overflow the stack a few thousand levels down (3,000 nested arrays
 * fit in 6 KB): a server's observation, schema or result is checked here before anything walks it, so nesting
 * ends its episode with a fixed reason instead of a RangeError from deep inside.
 */

/** Deeper than any schema or observation a real server sends, far shallower than the stack allows. */
export const MAX_JSON_DEPTH = 64;

/** Whether `value` has objects or arrays nested more than `max` levels (the value itself is level 1). */
export function nestsDeeperThan(value: unknown, max: number = MAX_JSON_DEPTH): boolean {
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth > max) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) if (child !== null && typeof child === 'object') stack.push([child, depth + 1]);
  }
  return false;
}
