/** Date arithmetic on calendar dates (YYYY-MM-DD, UTC, no time of day), for the date tools. */
const DAY_MS = 86_400_000;

/** Parses a real calendar date: "2024-02-30" is rejected, not rolled over. */
export function parseDate(text: string): number {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text.trim());
  if (!m) throw new Error(`"${text}" is not a date in the form YYYY-MM-DD`);
  const ms = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]));
  if (formatDate(ms) !== text.trim()) throw new Error(`"${text}" is not a calendar date`);
  return ms;
}

export function formatDate(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}

export function addDays(date: string, days: number): string {
  return formatDate(parseDate(date) + days * DAY_MS);
}

/** Whole days from `from` to `to` (negative when `to` is earlier). */
export function daysBetween(from: string, to: string): number {
  return Math.round((parseDate(to) - parseDate(from)) / DAY_MS);
}
