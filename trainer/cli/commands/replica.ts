import { z } from 'zod';
import { Id } from '../../../shared/schemas/index.ts';
import { startReplica } from '../../jobs/replica.ts';
import { tlsFor } from '../../assembly/wirings.ts';
import { flag, parseFlags } from '../argv/args.ts';
import { servingFlags, servingFromFlags } from '../argv/serving-flags.ts';
import { storeFlags, storeFromFlags } from '../argv/store-flags.ts';
import type { Command } from '../argv/command.ts';

export const command: Command = {
  name: 'replica',
  usage:
    'esopt replica --run RUN [--id ID] [--store DIR | --cloud] [--host H] [--port P] [--public-url URL] [--json]\n' +
    '  exits once the run\'s last update is applied; --public-url is the address workers reach this replica at (default its loopback URL); https: TLS, its certificate announced under the run',
  async run(argv, io) {
    const p = parseFlags(argv, {
      run: { type: 'string' },
      id: { type: 'string' },
      ...storeFlags,
      ...servingFlags,
    });
    const run = flag(p.values, 'run', Id);
    const id = p.values.id === undefined ? `replica-${process.pid}` : flag(p.values, 'id', Id);
    const serving = servingFromFlags(p, { host: '127.0.0.1', port: 0, publicUrl: 'optional' });
    const host = serving.host!;
    const port = serving.port!;
    const publicUrl = serving.publicUrl;
    const { store } = storeFromFlags(p);
    const say = (event: Record<string, unknown>, text: string) => io.stdout(p.json ? JSON.stringify(event) : text);
    const replica = await startReplica({
      store,
      run,
      id,
      token: process.env.ESOPT_TOKEN || undefined,
      // An https public URL means TLS: a certificate made now, announced with the address for the Episode function's pin.
      server: { host, port, tls: publicUrl ? await tlsFor(publicUrl) : undefined },
      publicUrl,
      onProgress: (e) => say({ replica: id, ...e }, `replica ${id}: ${e.kind} at iteration ${e.iteration}, θ ${e.thetaHash}`),
    });
    say({ replica: id, kind: 'listening', baseUrl: replica.baseUrl }, `replica ${id} serving at ${replica.baseUrl}`);
    const interrupted = new Promise<'interrupted'>((resolve) => {
      process.once('SIGINT', () => resolve('interrupted'));
      process.once('SIGTERM', () => resolve('interrupted'));
    });
    const outcome = await Promise.race([replica.done, interrupted]);
    await replica.stop();
    if (outcome === 'interrupted') return 130;
    say({ replica: id, kind: 'done', ...outcome }, `replica ${id}: run ${run} done after ${outcome.iterations} iterations, θ ${outcome.thetaHash}`);
    return 0;
  },
};
