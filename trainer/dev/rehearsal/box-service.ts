/**
 * A rehearsed box's service, started as systemd would start its unit: the unit's command line, working
 * directory and environment file, plus the endpoints that stand in for AWS on this machine. Its log goes
 * to a file beside the install (journald's place on the box).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, readFileSync } from 'node:fs';

export interface BoxService {
  id: string;
  /** Where the box serves inference (https, its certificate published in the bucket). */
  host: string;
  port: number;
  logFile: string;
  /** SIGTERM, as `systemctl stop` sends it, then waits for the exit. */
  stop(): Promise<void>;
  exited(): boolean;
}

export async function startBoxService(o: {
  id: string;
  command: string[];
  cwd: string;
  env: Record<string, string>;
  host: string;
  port: number;
  logFile: string;
  /** When the service is up; by default, when its first log line is written (each box's service logs one once it polls). */
  ready?: () => Promise<boolean>;
  readyTimeoutMs?: number;
}): Promise<BoxService> {
  const [bin, ...args] = o.command;
  if (!bin) throw new Error(`box ${o.id}: the unit has no ExecStart`);
  const log = createWriteStream(o.logFile, { flags: 'a' });
  const child: ChildProcess = spawn(bin, args, { cwd: o.cwd, env: o.env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.pipe(log, { end: false });
  child.stderr!.pipe(log, { end: false });
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let done = false;
  void exit.then(() => (done = true));
  const deadline = Date.now() + (o.readyTimeoutMs ?? 60_000);
  const ready = o.ready ?? (async () => tail(o.logFile).trim() !== '' && tail(o.logFile) !== '(no log)');
  for (;;) {
    if (done) throw new Error(`box ${o.id}: its service exited before it was ready:\n${tail(o.logFile)}`);
    if (await ready()) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`box ${o.id}: not ready after ${o.readyTimeoutMs ?? 60_000} ms:\n${tail(o.logFile)}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    id: o.id,
    host: o.host,
    port: o.port,
    logFile: o.logFile,
    exited: () => done,
    async stop() {
      if (!done) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exit;
      clearTimeout(timer);
      log.end();
    },
  };
}

function tail(file: string): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-15).join('\n');
  } catch {
    return '(no log)';
  }
}
