/**
 * `esopt train --replicas N` on one machine: N−1 `esopt replica` processes following the run in the same
 * filesystem store, each serving on its own loopback port. They exit by themselves once the run's last
 * update is applied; close() ends any still running (a run that failed).
 */
import type { ChildProcess } from 'node:child_process';
import { spawnEsopt } from '../assembly/esopt-process.ts';

export interface LocalReplicas {
  ids: string[];
  close(): Promise<void>;
}

export function spawnLocalReplicas(o: { count: number; run: string; storeRoot: string; env?: NodeJS.ProcessEnv; onExit?: (id: string, code: number | null) => void }): LocalReplicas {
  const children: Array<{ id: string; child: ChildProcess; exited: Promise<void> }> = [];
  for (let i = 1; i <= o.count; i++) {
    const id = `replica-${i}`;
    const child = spawnEsopt(['replica', '--run', o.run, '--id', id, '--store', o.storeRoot, '--json'], {
      env: { ...process.env, ...o.env },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    const exited = new Promise<void>((resolve) => child.once('exit', (code) => (o.onExit?.(id, code), resolve())));
    children.push({ id, child, exited });
  }
  return {
    ids: children.map((c) => c.id),
    async close() {
      for (const c of children) if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill('SIGTERM');
      await Promise.all(children.map((c) => c.exited));
    },
  };
}
