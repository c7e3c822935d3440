/** Bearer-token checks that leak nothing through timing. */
import { createHash, timingSafeEqual } from 'node:crypto';

/** Compares digests, not the strings: equal lengths, so timingSafeEqual never throws and the length leaks nothing. */
export function tokenMatches(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

/** The token of an `Authorization: Bearer <token>` header, or null. */
export function bearerToken(header: string | undefined): string | null {
  const m = /^Bearer +(\S+) *$/i.exec(header ?? '');
  return m ? m[1] : null;
}
