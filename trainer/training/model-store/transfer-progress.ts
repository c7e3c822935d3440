/**
 * A big file's progress as lines for stderr, as `esopt models` pushes and pulls: at most one line a
 * second per file and phase, and its last line when it is done. Small files say nothing, so a model of
 * small files pushes quietly.
 */
import type { TransferProgress } from './model-files.ts';

/** Files from this size up report their progress. */
const BIG_FILE = 64 * 1024 * 1024;

const VERB = { hash: 'hashing', upload: 'uploading', download: 'downloading' } as const;

export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${v.toFixed(1)} ${units[u]}`;
}

export function transferProgressLines(write: (line: string) => void, o: { minBytes?: number; intervalMs?: number; now?: () => number } = {}): (p: TransferProgress) => void {
  const minBytes = o.minBytes ?? BIG_FILE;
  const intervalMs = o.intervalMs ?? 1000;
  const now = o.now ?? Date.now;
  const last = new Map<string, number>();
  return (p) => {
    if (p.total < minBytes) return;
    const key = `${p.phase} ${p.path}`;
    const done = p.bytes >= p.total;
    const at = now();
    const previous = last.get(key);
    if (!done && previous !== undefined && at - previous < intervalMs) return;
    last.set(key, at);
    if (done) last.delete(key);
    write(`${VERB[p.phase]} ${p.path}: ${formatBytes(p.bytes)} of ${formatBytes(p.total)} (${Math.floor((100 * p.bytes) / p.total)}%)`);
  };
}
