/**
 * When an idle box stops itself: `idleMinutes` > 0 (0 means never), nothing running, and the last sign of
 * work (a job running or an entry seen in the queue) at least that long ago. Pure, so the rule is tested
 * without a clock or an instance.
 */
export interface IdleState {
  idleMinutes: number;
  /** Epoch ms of the last time work ran or was seen queued. */
  lastBusyAt: number;
  now: number;
  /** A run, evaluation or export is running now. */
  busy: boolean;
}

export function idleStopDue(s: IdleState): boolean {
  if (!Number.isFinite(s.idleMinutes) || s.idleMinutes < 0) throw new Error(`idleMinutes must be a number ≥ 0 (got ${s.idleMinutes})`);
  if (s.idleMinutes === 0 || s.busy) return false;
  return s.now - s.lastBusyAt >= s.idleMinutes * 60_000;
}
