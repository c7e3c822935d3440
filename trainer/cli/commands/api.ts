import { z } from 'zod';
import { startLocalApi } from '../../jobs/local-api.ts';
import { flag, parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { DEFAULT_API } from '../api-client.ts';
import { UsageError } from '../argv/usage-error.ts';
import { checkOpenBind } from '../argv/open-bind.ts';

export const command: Command = {
  name: 'api',
  usage: 'esopt api [--port P] [--host 127.0.0.1] [--store DIR] [--workers N] [--json]   (token: ESOPT_TOKEN; 32+ characters off loopback)',
  async run(argv, io) {
    const p = parseFlags(argv, { port: { type: 'string', default: new URL(DEFAULT_API).port }, host: { type: 'string', default: '127.0.0.1' }, store: { type: 'string', default: '.esopt/store' }, workers: { type: 'string', default: '4' } });
    const token = process.env.ESOPT_TOKEN;
    if (!token) throw new UsageError('set ESOPT_TOKEN: every route but /healthz, /openapi.json, /docs and the dashboard page needs it');
    const host = flag(p.values, 'host', z.string().min(1));
    // Off loopback the API is a deployed stack's: no request names a program or a path on this machine.
    const deployed = checkOpenBind(host, token);
    if (deployed) io.stderr(`--host ${host} is not loopback: requests get a deployed stack's checks (no program paths, no model dirs)`);
    const api = await startLocalApi({
      storeRoot: flag(p.values, 'store', z.string().min(1)),
      token,
      host,
      deployed,
      port: flag(p.values, 'port', z.coerce.number().int().min(0).max(65535)),
      workers: flag(p.values, 'workers', z.coerce.number().int().min(1).max(256)),
    });
    io.stdout(p.json ? JSON.stringify({ url: api.url, docs: `${api.url}/docs`, dashboard: `${api.url}/` }) : `esopt API on ${api.url} — dashboard ${api.url}/#token=<ESOPT_TOKEN>, docs ${api.url}/docs`);
    await new Promise<void>((resolve) => {
      process.once('SIGINT', resolve);
      process.once('SIGTERM', resolve);
    });
    io.stderr('shutting down: waiting for runs and evaluations in flight (Ctrl-C again to kill)');
    process.once('SIGINT', () => process.exit(130));
    await api.close();
    return 0;
  },
};
