/** Ids the API allocates: readable prefix, time, randomness; always a valid `Id` (≤ 64 characters). */
import { randomBytes } from 'node:crypto';

export function newId(prefix: string): string {
  return `${prefix.slice(0, 40)}-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
}
