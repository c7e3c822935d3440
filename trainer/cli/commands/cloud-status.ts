import { z } from 'zod';
import { pinnedFetch } from '../../../environments/policies/pinned-fetch.ts';
import { readBoxBootStates, type BoxBootStates } from '../../../functions/http-api/box-reader.ts';
import { keys } from '../../../shared/keys.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import { readJson } from '../../../shared/store/json.ts';
import { TrainerCertificate } from '../../../shared/schemas/trainer-certificate.ts';
import { bucketStore } from '../../assembly/stores.ts';
import { flag, parseFlags } from '../argv/args.ts';
import type { Command, CommandIo } from '../argv/command.ts';
import { DEFAULT_OUTPUTS, readStackOutputs } from '../argv/stack-outputs.ts';
import { UsageError } from '../argv/usage-error.ts';

interface Check {
  ok: boolean;
  detail: string;
}

export interface CloudStatus {
  bucket: string;
  boxes: BoxBootStates | { error: string };
  api: Check | null;
  trainer: (Check & { url: string; certificateSha256?: string }) | null;
  episodeFunction: (Check & { name: string }) | null;
  artifactSha256?: string;
}

const TIMEOUT_MS = 10_000;

async function apiCheck(apiUrl: string): Promise<Check> {
  try {
    const res = await fetch(new URL('/healthz', apiUrl), { signal: AbortSignal.timeout(TIMEOUT_MS) });
    const body = await res.text();
    return { ok: res.ok, detail: `GET /healthz: ${res.status} ${body.slice(0, 200)}` };
  } catch (err) {
    return { ok: false, detail: `GET /healthz: ${errorText(err)}` };
  }
}

/** The box's /healthz over TLS pinned to the certificate it published, as the Episode function connects. */
async function trainerCheck(store: ObjectStore, trainerUrl: string): Promise<NonNullable<CloudStatus['trainer']>> {
  const url = new URL('/healthz', trainerUrl).href;
  const pin = await readJson(store, keys.trainerCertificate(), { parse: (v) => TrainerCertificate.safeParse(v) });
  if (pin === null) return { ok: false, url, detail: `no certificate published at ${keys.trainerCertificate()}: the trainer box has not started its service` };
  if (!pin.success) return { ok: false, url, detail: `${keys.trainerCertificate()} is not a trainer certificate` };
  try {
    const res = await pinnedFetch(pin.data)(url, { signal: AbortSignal.timeout(TIMEOUT_MS) });
    return { ok: res.ok, url, certificateSha256: pin.data.sha256, detail: `GET /healthz (pinned): ${res.status} ${(await res.text()).slice(0, 200)}` };
  } catch (err) {
    return { ok: false, url, certificateSha256: pin.data.sha256, detail: `GET /healthz (pinned): ${errorText(err)}` };
  }
}

/**
 * A RequestResponse invoke with an event the handler refuses as malformed: it answers
 * `{ok: false, error: "invalid episode event: …"}` without playing, reading or writing anything, so an
 * answer of that shape means the function loads and runs.
 */
async function episodeCheck(name: string, region: string): Promise<NonNullable<CloudStatus['episodeFunction']>> {
  const { LambdaClient, InvokeCommand } = await import('@aws-sdk/client-lambda');
  const endpoint = process.env.AWS_ENDPOINT_URL_LAMBDA ?? process.env.AWS_ENDPOINT_URL;
  const client = new LambdaClient({ region, maxAttempts: 2, ...(endpoint ? { endpoint } : {}) });
  try {
    const res = await client.send(new InvokeCommand({ FunctionName: name, InvocationType: 'RequestResponse', Payload: JSON.stringify({ esoptStatusPing: true }) }), { abortSignal: AbortSignal.timeout(60_000) });
    const text = res.Payload ? new TextDecoder().decode(res.Payload) : '';
    if (res.FunctionError) return { ok: false, name, detail: `the function failed (${res.FunctionError}): ${text.slice(0, 300)}` };
    const answer = JSON.parse(text) as { ok?: boolean; error?: string };
    const ok = answer.ok === false && /^invalid episode event/.test(answer.error ?? '');
    return { ok, name, detail: ok ? 'answers (a ping event, refused as malformed: nothing played or written)' : `unexpected answer: ${text.slice(0, 300)}` };
  } catch (err) {
    return { ok: false, name, detail: errorText(err) };
  } finally {
    client.destroy();
  }
}

function errorText(err: unknown): string {
  const e = err as Error & { cause?: Error };
  return e.cause ? `${e.message}: ${e.cause.message}` : `${e.name === 'Error' ? '' : `${e.name}: `}${e.message}`;
}

export async function cloudStatus(o: { bucket: string; region: string; apiUrl?: string; trainerUrl?: string; episodeFunction?: string; artifactSha256?: string; s3Endpoint?: string }): Promise<CloudStatus> {
  const store = bucketStore({ bucket: o.bucket, region: o.region, ...(o.s3Endpoint ? { endpoint: o.s3Endpoint, forcePathStyle: true } : {}), maxAttempts: 3 });
  try {
    const [boxes, api, trainer, episodeFunction] = await Promise.all([
      readBoxBootStates(store).catch((err: unknown) => ({ error: errorText(err) })),
      o.apiUrl ? apiCheck(o.apiUrl) : null,
      o.trainerUrl ? trainerCheck(store, o.trainerUrl).catch((err: unknown) => ({ ok: false, url: o.trainerUrl!, detail: errorText(err) })) : null,
      o.episodeFunction ? episodeCheck(o.episodeFunction, o.region) : null,
    ]);
    return { bucket: o.bucket, boxes, api, trainer, episodeFunction, ...(o.artifactSha256 ? { artifactSha256: o.artifactSha256 } : {}) };
  } finally {
    store.destroy();
  }
}

function render(s: CloudStatus): string {
  const mark = (c: Check | null) => (c === null ? '–' : c.ok ? 'ok' : 'FAILED');
  const lines = [`bucket ${s.bucket}`];
  if ('error' in s.boxes) lines.push(`boxes: could not read boot states: ${s.boxes.error}`);
  else {
    if (!s.boxes.boxes.length) lines.push('boxes: no boot state yet (a box writes boxes/<box>/boot.json from its first step)');
    for (const b of s.boxes.boxes) {
      const stale = s.artifactSha256 && b.artifactSha256 !== s.artifactSha256 ? ` (booted artifact ${b.artifactSha256.slice(0, 12)}, deployed ${s.artifactSha256.slice(0, 12)})` : '';
      lines.push(`box ${b.box}: ${b.status}${b.status === 'ready' ? '' : ` at step ${b.step}`} since ${b.at}${stale}`);
      if (b.status === 'failed') lines.push(`  ${b.error ?? ''}`, ...b.log.slice(-10).map((l) => `  | ${l}`));
    }
    for (const u of s.boxes.unreadable) lines.push(`box state ${u.key}: unreadable (${u.error})`);
  }
  if (s.api) lines.push(`api: ${mark(s.api)} ${s.api.detail}`);
  if (s.trainer) lines.push(`trainer inference ${s.trainer.url}: ${mark(s.trainer)} ${s.trainer.detail}`);
  if (s.episodeFunction) lines.push(`episode function ${s.episodeFunction.name}: ${mark(s.episodeFunction)} ${s.episodeFunction.detail}`);
  return lines.join('\n');
}

/** Every check that ran passed and every box is ready. */
export function healthy(s: CloudStatus): boolean {
  const checks = [s.api, s.trainer, s.episodeFunction].filter((c): c is Check => c !== null);
  return !('error' in s.boxes) && s.boxes.boxes.length > 0 && s.boxes.boxes.every((b) => b.status === 'ready') && s.boxes.unreadable.length === 0 && checks.every((c) => c.ok);
}

async function run(argv: string[], io: CommandIo): Promise<number> {
  const p = parseFlags(argv, {
    outputs: { type: 'string' },
    'api-url': { type: 'string' },
    bucket: { type: 'string' },
    'trainer-url': { type: 'string' },
    'episode-function': { type: 'string' },
    region: { type: 'string' },
  });
  const path = flag(p.values, 'outputs', z.string().min(1).optional());
  const outputs = await readStackOutputs(path);
  const bucket = flag(p.values, 'bucket', z.string().min(3).optional()) ?? outputs.bucket;
  if (!bucket) throw new UsageError(`no bucket: deploy with \`sst deploy\` (it writes ${path ?? DEFAULT_OUTPUTS}) or pass --bucket`);
  const status = await cloudStatus({
    bucket,
    region: flag(p.values, 'region', z.string().min(1).optional()) ?? process.env.ESOPT_AWS_REGION ?? process.env.AWS_REGION ?? 'us-east-1',
    apiUrl: flag(p.values, 'api-url', z.url().optional()) ?? outputs.apiUrl,
    trainerUrl: flag(p.values, 'trainer-url', z.url({ protocol: /^https$/ }).optional()) ?? outputs.trainerUrl,
    episodeFunction: flag(p.values, 'episode-function', z.string().min(1).optional()) ?? outputs.episodeFunction,
    artifactSha256: outputs.artifactSha256,
    s3Endpoint: process.env.AWS_ENDPOINT_URL_S3 ?? process.env.AWS_ENDPOINT_URL,
  });
  io.stdout(p.json ? JSON.stringify({ ...status, healthy: healthy(status) }) : render(status));
  return healthy(status) ? 0 : 1;
}

export const command: Command = {
  name: 'cloud status',
  usage:
    'esopt cloud status [--outputs .sst/outputs.json] [--bucket B] [--api-url URL] [--trainer-url URL] [--episode-function NAME] [--region R] [--json]\n' +
    "  each box's boot state (boxes/<box>/boot.json in the bucket), the Api's GET /healthz, the trainer box's /healthz over TLS pinned to\n" +
    '  the certificate it published, and a ping invoke of the Episode function; flags override the outputs `sst deploy` wrote.\n' +
    '  Exit 0 when every box is ready and every check answered, 1 otherwise. Endpoint overrides: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL_LAMBDA',
  run,
};
