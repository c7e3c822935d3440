/**
 * The most common error among failed episodes, for the views: messages that differ only in their numbers
 * (`prompt of 2100 tokens > 2048`) count as one, shown by their first occurrence.
 */
import { z } from 'zod';

export const TopError = z.object({ message: z.string(), count: z.number().int().min(1) }).meta({ id: 'TopError' });
export type TopError = z.infer<typeof TopError>;

export function mostCommonError(errors: Iterable<string | null>): TopError | null {
  const groups = new Map<string, TopError>();
  for (const e of errors) {
    if (e === null) continue;
    const key = e.replace(/\d+(\.\d+)?/g, '#').slice(0, 200);
    const g = groups.get(key);
    if (g) g.count++;
    else groups.set(key, { message: e.length > 300 ? `${e.slice(0, 297)}…` : e, count: 1 });
  }
  let top: TopError | null = null;
  // ties keep the first seen
  for (const g of groups.values()) if (!top || g.count > top.count) top = g;
  return top;
}
