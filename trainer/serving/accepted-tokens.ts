/**
 * The bearer tokens a box accepts while its token rotates: the current one, and for `graceMs` after a
 * change is seen the one before it, so an episode that started with the old token still finishes. A
 * second change inside the grace drops the oldest. Both candidates are always compared, in constant time,
 * so a caller cannot tell from the timing which one (if either) it came close to.
 */
import { tokenMatches } from '../../shared/bearer-token.ts';

export class AcceptedTokens {
  private current: string;
  private previous: { token: string; until: number } | null = null;

  constructor(
    initial: string,
    readonly graceMs: number,
  ) {
    if (!initial) throw new Error('the initial token is empty');
    if (!Number.isFinite(graceMs) || graceMs < 0) throw new Error(`graceMs must be a finite number ≥ 0 (got ${graceMs})`);
    this.current = initial;
  }

  /** Records the token as read now; resolves whether it is a change. */
  see(token: string, now: number): boolean {
    if (!token) throw new Error('the token read is empty');
    if (tokenMatches(token, this.current)) return false;
    this.previous = { token: this.current, until: now + this.graceMs };
    this.current = token;
    return true;
  }

  accepts(given: string, now: number): boolean {
    const isCurrent = tokenMatches(given, this.current);
    const isPrevious = this.previous ? tokenMatches(given, this.previous.token) : false;
    return isCurrent || (isPrevious && now < this.previous!.until);
  }

  /** When the previous token stops being accepted, or null when none is. */
  graceEndsAt(now: number): number | null {
    return this.previous && now < this.previous.until ? this.previous.until : null;
  }
}
