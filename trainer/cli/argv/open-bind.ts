/**
 * A server bound beyond loopback (`--host` other than 127.0.0.0/8, ::1 or localhost) is reachable from the
 * network: `esopt api` and `esopt serve` start there only with a bearer token of at least
 * OPEN_BIND_MIN_TOKEN characters (issue 45, "No open binds by accident").
 */
import { isIPv4 } from 'node:net';
import { UsageError } from './usage-error.ts';

export const OPEN_BIND_MIN_TOKEN = 32;

/** Whether `host` keeps a server on this machine: 127.0.0.0/8, ::1 (bracketed or spelled out) or localhost. */
export function isLoopbackHost(host: string): boolean {
  const h = host.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1');
  if (h === 'localhost') return true;
  if (isIPv4(h)) return h.startsWith('127.');
  return h === '::1' || /^(0{1,4}:){7}0{0,3}1$/.test(h);
}

/** Refuses (UsageError, exit 2) a non-loopback bind without a token of OPEN_BIND_MIN_TOKEN characters; returns whether the bind is open. */
export function checkOpenBind(host: string, token: string | undefined): boolean {
  if (isLoopbackHost(host)) return false;
  if (!token || token.length < OPEN_BIND_MIN_TOKEN) {
    throw new UsageError(
      `--host ${host} is not a loopback address, so anyone who reaches it may call this server: set ESOPT_TOKEN to a secret of at least ${OPEN_BIND_MIN_TOKEN} characters (e.g. export ESOPT_TOKEN=$(openssl rand -hex 32))${token ? `; it has ${token.length}` : ''}, or bind to --host 127.0.0.1`,
    );
  }
  return true;
}
