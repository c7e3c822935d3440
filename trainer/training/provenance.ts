/**
 * Where and when a report was made, recorded in every report a command writes (the demo's, the rehearsal's,
 * each benchmark's): the commit of this checkout and whether its tracked files differed from it, the time,
 * and the machine's load averages, so a figure can be traced to the code and the conditions that made it.
 * Outside a git checkout (the box installs an artifact without .git) the commit is null.
 */
import { execFileSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

export const Provenance = z.object({
  /** The checkout's HEAD, or null outside a git checkout. */
  commit: z.string().nullable(),
  /** Tracked files changed against `commit` (untracked files do not count); null without a checkout. */
  dirty: z.boolean().nullable(),
  date: z.string(),
  /** 1-, 5- and 15-minute load averages when the report was made. */
  load: z.array(z.number()),
});
export type Provenance = z.infer<typeof Provenance>;

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

function git(args: string[]): string | null {
  try {
    return execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 10_000 }).trim();
  } catch {
    return null;
  }
}

export function provenance(now = new Date()): Provenance {
  const commit = git(['rev-parse', 'HEAD']);
  const status = commit === null ? null : git(['status', '--porcelain', '--untracked-files=no']);
  return { commit, dirty: status === null ? null : status !== '', date: now.toISOString(), load: loadavg().map((l) => Math.round(l * 100) / 100) };
}
