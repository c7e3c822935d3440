/**
 * Keys of rollouts: an agent that plays an episode itself (environments/rollout/) reaches the member's
 * model with a key of its own, issued here for that one model and episode. The server counts the calls
 * and tokens each key was served, so the Episode function can refuse the reward of a rollout that never
 * called its member (an agent that ignores the endpoint cannot poison an update).
 *
 * Invariants: a key is 256 random bits, shown once (only its id comes back afterwards); a key opens chat
 * completions of its own model only and nothing else on the server; it stops working at its expiry or
 * when revoked; the table is bounded (expired keys go first, then the oldest), so issuing cannot grow
 * the server's memory without limit.
 */
import { createHash, randomBytes } from 'node:crypto';

export const ROLLOUT_KEY_PREFIX = 'esr_';

export interface RolloutUsage {
  model: string;
  calls: number;
  promptTokens: number;
  completionTokens: number;
  expiresAt: number;
}

interface Entry extends RolloutUsage {
  id: string;
}

/** Whether a bearer token is a rollout key (by its form only; `resolve` says whether it is a live one). */
export function isRolloutKey(token: string): boolean {
  return token.startsWith(ROLLOUT_KEY_PREFIX);
}

/** Keys are looked up by their digest: the table never holds a usable key. */
function digest(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

export class RolloutKeys {
  private readonly byDigest = new Map<string, Entry>();
  private readonly byId = new Map<string, string>();

  constructor(
    readonly capacity = 100_000,
    private readonly now: () => number = Date.now,
  ) {}

  issue(model: string, expiresAt: number): { id: string; key: string } {
    this.evict();
    const key = `${ROLLOUT_KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
    const id = `rk_${randomBytes(12).toString('hex')}`;
    const d = digest(key);
    this.byDigest.set(d, { id, model, calls: 0, promptTokens: 0, completionTokens: 0, expiresAt });
    this.byId.set(id, d);
    return { id, key };
  }

  /** The live entry of a presented key, or null (unknown, expired or revoked). */
  resolve(key: string): (RolloutUsage & { id: string }) | null {
    const entry = this.byDigest.get(digest(key));
    return entry && entry.expiresAt > this.now() ? entry : null;
  }

  /** Counts one served call of the key `id`. */
  record(id: string, promptTokens: number, completionTokens: number): void {
    const d = this.byId.get(id);
    const entry = d === undefined ? undefined : this.byDigest.get(d);
    if (!entry) return;
    entry.calls += 1;
    entry.promptTokens += promptTokens;
    entry.completionTokens += completionTokens;
  }

  /** What the key `id` was served (also after expiry, until it is revoked or evicted). */
  usage(id: string): RolloutUsage | null {
    const d = this.byId.get(id);
    const entry = d === undefined ? undefined : this.byDigest.get(d);
    if (!entry) return null;
    const { model, calls, promptTokens, completionTokens, expiresAt } = entry;
    return { model, calls, promptTokens, completionTokens, expiresAt };
  }

  revoke(id: string): boolean {
    const d = this.byId.get(id);
    if (d === undefined) return false;
    this.byId.delete(id);
    return this.byDigest.delete(d);
  }

  get size(): number {
    return this.byDigest.size;
  }

  /** Room for one more: expired entries first, then the oldest issued (a Map iterates in insertion order). */
  private evict(): void {
    if (this.byDigest.size < this.capacity) return;
    const now = this.now();
    for (const [d, entry] of this.byDigest) if (entry.expiresAt <= now) this.drop(d, entry.id);
    for (const [d, entry] of this.byDigest) {
      if (this.byDigest.size < this.capacity) break;
      this.drop(d, entry.id);
    }
  }

  private drop(d: string, id: string): void {
    this.byDigest.delete(d);
    this.byId.delete(id);
  }
}
