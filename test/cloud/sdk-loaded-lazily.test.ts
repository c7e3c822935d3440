/**
 * The local paths do not load the AWS SDK (nor `selfsigned`): an episode worker of the local pool on an fs
 * store, and the module graphs of `esopt start`, `train` and `api`, imported in a child process whose
 * resolve hook records every such package and who imported it. The same child then asks an S3 store for
 * its client, which must load @aws-sdk/client-s3: the hook sees the SDK when it does load.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const scratch = mkdtempSync(join(tmpdir(), 'esopt-lazy-sdk-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A resolve hook (it runs on the loader thread) appending `specifier <- importer` for the watched packages. */
const HOOK = `
import { appendFileSync } from 'node:fs';
let log;
export function initialize(data) { log = data.log; }
export async function resolve(specifier, context, next) {
  if (/^(@aws-sdk\\/|selfsigned$)/.test(specifier)) appendFileSync(log, specifier + ' <- ' + (context.parentURL ?? '?') + '\\n');
  return next(specifier, context);
}`;

const CHILD = `
import { register } from 'node:module';
import { readFileSync } from 'node:fs';
const log = process.env.LOG;
const read = () => { try { return readFileSync(log, 'utf8').trim().split('\\n').filter(Boolean).map((l) => l.replace(process.env.ROOT_URL, '')); } catch { return []; } };
register('data:text/javascript,' + encodeURIComponent(process.env.HOOK), { data: { log } });
for (const entry of ['trainer/fanout/local-worker.ts', 'trainer/cli/commands/start.ts', 'trainer/cli/commands/train.ts', 'trainer/cli/commands/api.ts']) {
  await import(new URL(entry, process.env.ROOT_URL).href);
}
const local = read();
const { S3ObjectStore } = await import(new URL('shared/store/s3.ts', process.env.ROOT_URL).href);
const store = new S3ObjectStore({ bucket: 'esopt-lazy', endpoint: 'http://127.0.0.1:9', forcePathStyle: true });
await store.sdkClient();
store.destroy();
console.log(JSON.stringify({ local, afterUse: read().slice(local.length) }));
`;

describe('the AWS SDK loads only on the cloud paths', () => {
  it('a local worker and the start/train/api commands load none of it; an S3 store does on use', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', CHILD], {
      cwd: ROOT,
      env: {
        ...process.env,
        HOOK,
        LOG: join(scratch, 'resolved.log'),
        ROOT_URL: pathToFileURL(`${ROOT}/`).href,
        // What the pool gives each worker: the store to write to (an fs one, the local runs' store).
        ESOPT_WORKER_STORE: JSON.stringify({ kind: 'fs', root: join(scratch, 'store') }),
      },
    });
    const { local, afterUse } = JSON.parse(stdout.trim().split('\n').at(-1)!) as { local: string[]; afterUse: string[] };
    expect(local).toEqual([]);
    expect(afterUse).toEqual(['@aws-sdk/client-s3 <- shared/store/s3.ts']);
  });
});
