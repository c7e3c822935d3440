/**
 * The box's token follows the stack's token parameter in SSM (sst.config.ts, TrainerTokenParameter): read
 * every `refreshMs`, and again when a caller presents a token the box does not know, because a deploy
 * updates the parameter before the Episode function's environment and a new invocation may carry the new
 * token before the next periodic read. That caller waits for a read no sooner than `missRefreshMs` after the
 * last one, shared by every caller that misses meanwhile, so wrong tokens cost SSM at most one read per
 * `missRefreshMs` and a right one is never refused for coming too soon. The old token stays accepted for
 * `graceMs` after the change is seen (accepted-tokens.ts). A failed read keeps what the box has.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { AcceptedTokens } from './accepted-tokens.ts';

export const DEFAULT_TOKEN_REFRESH_MS = 60_000;
export const DEFAULT_TOKEN_GRACE_MS = 10 * 60_000;
export const DEFAULT_TOKEN_MISS_REFRESH_MS = 5_000;

/** Whether a presented bearer token opens the box's inference port. */
export interface TokenCheck {
  accepts(given: string): Promise<boolean>;
}

export interface TokenFollowerOptions {
  /** The token the box started with (its env file). */
  initial: string;
  /** Reads the parameter; null when it is missing. */
  read: () => Promise<string | null>;
  refreshMs?: number;
  graceMs?: number;
  missRefreshMs?: number;
  now?: () => number;
  log?: Pick<Logger, 'info' | 'error'>;
}

export class TokenFollower implements TokenCheck {
  private readonly tokens: AcceptedTokens;
  private readonly now: () => number;
  private lastReadAt = -Infinity;
  private reading: Promise<void> | null = null;
  private missRead: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly o: TokenFollowerOptions) {
    this.tokens = new AcceptedTokens(o.initial, o.graceMs ?? DEFAULT_TOKEN_GRACE_MS);
    this.now = o.now ?? Date.now;
  }

  /** Reads now and then every refreshMs until close(). */
  start(): void {
    if (this.timer) return;
    void this.refresh();
    this.timer = setInterval(() => void this.refresh(), this.o.refreshMs ?? DEFAULT_TOKEN_REFRESH_MS);
    this.timer.unref();
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** One read at a time: callers that arrive while one is in flight share it. */
  refresh(): Promise<void> {
    this.reading ??= this.readOnce().finally(() => (this.reading = null));
    return this.reading;
  }

  private async readOnce(): Promise<void> {
    this.lastReadAt = this.now();
    try {
      const value = await this.o.read();
      if (!value) {
        this.o.log?.error({}, 'the token parameter is missing or empty; keeping the tokens the box has');
        return;
      }
      if (this.tokens.see(value, this.now())) {
        this.o.log?.info({ graceEndsAt: new Date(this.tokens.graceEndsAt(this.now()) ?? this.now()).toISOString() }, 'token rotated: the previous token is accepted until the grace ends');
      }
    } catch (err) {
      this.o.log?.error({ error: (err as Error).message }, 'reading the token parameter failed; keeping the tokens the box has');
    }
  }

  async accepts(given: string): Promise<boolean> {
    if (this.tokens.accepts(given, this.now())) return true;
    await this.readAfterMiss();
    return this.tokens.accepts(given, this.now());
  }

  private readAfterMiss(): Promise<void> {
    this.missRead ??= (async () => {
      const wait = this.lastReadAt + (this.o.missRefreshMs ?? DEFAULT_TOKEN_MISS_REFRESH_MS) - this.now();
      if (wait > 0) await sleep(wait);
      await this.refresh();
    })().finally(() => (this.missRead = null));
    return this.missRead;
  }
}
