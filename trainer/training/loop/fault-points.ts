/**
 * Named points in an iteration where a crash is most dangerous. The loop calls the hook at each; the CLI
 * wires it to ESOPT_STOP_AT=<point>@<iteration>, which makes the process SIGSTOP itself there so a test
 * can SIGKILL it at exactly that point (a real kill -9, with nothing flushed or cleaned up).
 */
export const FAULT_POINTS = ['after-fanout', 'after-update', 'after-update-record', 'mid-checkpoint', 'after-checkpoint'] as const;
export type FaultPoint = (typeof FAULT_POINTS)[number];
export type FaultHook = (point: FaultPoint, iteration: number) => Promise<void> | void;

/** The hook described by ESOPT_STOP_AT, or undefined when unset. */
export function stopAtFromEnv(value: string | undefined): FaultHook | undefined {
  if (!value) return undefined;
  const m = /^([a-z-]+)@(\d+)$/.exec(value);
  if (!m || !(FAULT_POINTS as readonly string[]).includes(m[1])) {
    throw new Error(`ESOPT_STOP_AT must be <point>@<iteration> with point one of ${FAULT_POINTS.join(', ')}; got ${JSON.stringify(value)}`);
  }
  const [point, iteration] = [m[1], Number(m[2])];
  return (p, k) => {
    if (p === point && k === iteration) {
      process.stderr.write(`esopt: stopping at ${p}@${k} (ESOPT_STOP_AT)\n`);
      process.kill(process.pid, 'SIGSTOP');
    }
  };
}
