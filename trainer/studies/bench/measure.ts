/** Shared by the benchmark commands: robust timing and a description of the machine a figure came from. */
import { availableParallelism, cpus, totalmem } from 'node:os';
import { provenance } from '../../training/provenance.ts';

export function median(xs: readonly number[]): number {
  if (xs.length === 0) throw new RangeError('median of nothing');
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/** Milliseconds one call of `fn` takes. */
export async function timeMs(fn: () => unknown): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

/** The machine, with its 1/5/15-minute load averages at the time (figures from a shared machine say how shared) and the commit measured. */
export function machineInfo(): { cpu: string; cores: number; memoryGiB: number; node: string; date: string; load: number[]; commit: string | null; dirty: boolean | null } {
  const made = provenance();
  return {
    cpu: cpus()[0]?.model.trim() ?? 'unknown',
    cores: availableParallelism(),
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    date: made.date,
    load: made.load,
    commit: made.commit,
    dirty: made.dirty,
  };
}
