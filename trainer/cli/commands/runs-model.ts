import { createHash } from 'node:crypto';
import { createWriteStream, renameSync, rmSync } from 'node:fs';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { ExportFormat, Iteration, ModelExportView } from '../../../shared/schemas/index.ts';
import { flag, parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { ApiClient, apiFlags, idArgument } from '../api-client.ts';

/** How often a queued export is asked about again (the route's Retry-After is 5 s). */
const POLL_MS = 5000;

export const command: Command = {
  name: 'runs model',
  usage: 'esopt runs model <id> --out FILE.tar [--iteration K] [--format onnx|safetensors] [--api URL] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, { ...apiFlags, out: { type: 'string' }, iteration: { type: 'string' }, format: { type: 'string' } }, true);
    const id = idArgument(p.positionals, 'run');
    const out = flag(p.values, 'out', z.string().min(1));
    const iteration = flag(p.values, 'iteration', z.coerce.number().pipe(Iteration).optional());
    const format = flag(p.values, 'format', ExportFormat.default('onnx'));
    const client = ApiClient.fromFlags(p.values);
    const path = `/runs/${id}/model?${iteration === undefined ? '' : `iteration=${iteration}&`}format=${format}`;

    // The route answers 202 while the archive is made (on the trainer box, deployed), then its URL.
    let view: ModelExportView;
    for (;;) {
      const res = await client.raw(path, { Accept: 'application/json' });
      view = ModelExportView.parse(await res.json());
      if (res.status !== 202) break;
      io.stderr(`run ${id}, θ after ${view.iteration} updates, ${format}: ${view.state}…\n`);
      await sleep(POLL_MS);
    }
    if (!view.url || !view.sha256) throw new Error(`the API says the export is ${view.state} but gives no archive URL`);
    // A presigned URL downloads without the token; the local API's own route needs it.
    const res = /^https?:/.test(view.url) ? await fetch(view.url) : await client.raw(view.url);
    if (!res.ok || !res.body) throw new Error(`downloading the archive: HTTP ${res.status}`);
    const hash = createHash('sha256');
    const partial = `${out}.partial`;
    try {
      await pipeline(
        Readable.fromWeb(res.body as import('node:stream/web').ReadableStream),
        new Transform({ transform: (chunk: Buffer, _enc, done) => (hash.update(chunk), done(null, chunk)) }),
        createWriteStream(partial),
      );
      const sha256 = hash.digest('hex');
      if (sha256 !== view.sha256) throw new Error(`the archive downloaded has SHA-256 ${sha256}, the API says ${view.sha256}: not kept`);
      renameSync(partial, out);
    } finally {
      rmSync(partial, { force: true });
    }
    if (p.json) io.stdout(JSON.stringify({ run: id, iteration: view.iteration, format, out, bytes: view.bytes, sha256: view.sha256, thetaHash: view.thetaHash }));
    else io.stdout(`${out}: run ${id} after ${view.iteration} updates (${format}), ${view.bytes} bytes, sha256 ${view.sha256}; unpack with tar -xf ${out} -C DIR`);
    return 0;
  },
};
