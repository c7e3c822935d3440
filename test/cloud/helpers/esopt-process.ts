/** The esopt CLI as a child process with only the environment a trainer box would have, and a free loopback port. */
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';

const BIN = join(import.meta.dirname, '../../../trainer/cli/bin.js');

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export interface Exit {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function esopt(args: string[], env: Record<string, string>): Promise<Exit> {
  return new Promise((resolve, reject) => {
    // Only what a trainer box would have: no AWS settings inherited from whoever runs the tests.
    const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AWS_') && !k.startsWith('ESOPT_')));
    const child = spawn(process.execPath, [BIN, ...args], { env: { ...inherited, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}
