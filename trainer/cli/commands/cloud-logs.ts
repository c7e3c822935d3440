import { z } from 'zod';
import { flag, parseFlags } from '../argv/args.ts';
import type { Command, CommandIo } from '../argv/command.ts';
import { DEFAULT_OUTPUTS, readStackOutputs, type StackOutputs } from '../argv/stack-outputs.ts';
import { UsageError } from '../argv/usage-error.ts';

const Source = z.enum(['box', 'episode', 'api']);
const GROUP_OF: Record<z.infer<typeof Source>, keyof StackOutputs> = { box: 'boxLogGroup', episode: 'episodeLogGroup', api: 'apiLogGroup' };

export interface LogLine {
  timestamp: number;
  stream: string;
  message: string;
  eventId: string;
}

/** `--since`: a duration back from now (`30s`, `15m`, `2h`, `1d`) or an ISO time. */
export function sinceMs(value: string, now = Date.now()): number {
  const d = /^(\d+)(s|m|h|d)$/.exec(value);
  if (d) return now - Number(d[1]) * { s: 1e3, m: 6e4, h: 36e5, d: 864e5 }[d[2] as 's' | 'm' | 'h' | 'd'];
  const t = Date.parse(value);
  if (!Number.isFinite(t) || !/^\d{4}-\d{2}-\d{2}/.test(value)) throw new UsageError(`--since ${value}: give a duration (30s, 15m, 2h, 1d) or an ISO time`);
  return t;
}

/** Every event of `group` from `startTime` on (all pages), in time order. */
export async function readLogs(o: { group: string; region: string; startTime: number; filter?: string; endpoint?: string }): Promise<LogLine[]> {
  const { CloudWatchLogsClient, FilterLogEventsCommand } = await import('@aws-sdk/client-cloudwatch-logs');
  const client = new CloudWatchLogsClient({ region: o.region, maxAttempts: 3, ...(o.endpoint ? { endpoint: o.endpoint } : {}) });
  const out: LogLine[] = [];
  try {
    let nextToken: string | undefined;
    do {
      const r = await client.send(new FilterLogEventsCommand({ logGroupName: o.group, startTime: o.startTime, ...(o.filter ? { filterPattern: JSON.stringify(o.filter) } : {}), ...(nextToken ? { nextToken } : {}) }));
      for (const e of r.events ?? []) out.push({ timestamp: e.timestamp ?? 0, stream: e.logStreamName ?? '', message: e.message ?? '', eventId: e.eventId ?? '' });
      nextToken = r.nextToken;
    } while (nextToken);
  } catch (err) {
    if ((err as Error).name === 'ResourceNotFoundException') throw new UsageError(`log group ${o.group} does not exist yet (nothing has logged there, or the stack is not deployed)`);
    throw err;
  } finally {
    client.destroy();
  }
  return out.sort((a, b) => a.timestamp - b.timestamp || a.eventId.localeCompare(b.eventId));
}

const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };

/** One line for a person: the time, the stream, and a pino line's level and message (anything else as it came). */
export function renderLine(l: LogLine): string {
  let text = l.message.trimEnd();
  try {
    const j = JSON.parse(text) as { level?: number; msg?: string; err?: { message?: string } };
    if (typeof j.msg === 'string') text = `${LEVELS[j.level ?? 30] ?? j.level} ${j.msg}${j.err?.message ? `: ${j.err.message}` : ''}`;
  } catch {
    // not JSON: Lambda's own START/END/REPORT lines, plain text
  }
  return `${new Date(l.timestamp).toISOString()} ${l.stream} ${text}`;
}

async function run(argv: string[], io: CommandIo): Promise<number> {
  const p = parseFlags(argv, { outputs: { type: 'string' }, since: { type: 'string' }, follow: { type: 'boolean' }, filter: { type: 'string' }, region: { type: 'string' }, group: { type: 'string' } }, true);
  if (p.positionals.length !== 1) throw new UsageError('name what to read: esopt cloud logs box|episode|api');
  const source = Source.safeParse(p.positionals[0]);
  if (!source.success) throw new UsageError(`${p.positionals[0]}: read box, episode or api`);
  const path = flag(p.values, 'outputs', z.string().min(1).optional());
  const outputs = await readStackOutputs(path);
  const group = flag(p.values, 'group', z.string().min(1).optional()) ?? outputs[GROUP_OF[source.data]];
  if (typeof group !== 'string') throw new UsageError(`no ${source.data} log group: deploy with \`sst deploy\` (it writes ${path ?? DEFAULT_OUTPUTS}) or pass --group`);
  const region = flag(p.values, 'region', z.string().min(1).optional()) ?? process.env.ESOPT_AWS_REGION ?? process.env.AWS_REGION ?? 'us-east-1';
  const endpoint = process.env.AWS_ENDPOINT_URL_CLOUDWATCH_LOGS ?? process.env.AWS_ENDPOINT_URL;
  const filter = flag(p.values, 'filter', z.string().min(1).optional());
  let startTime = sinceMs(flag(p.values, 'since', z.string().min(1).default('1h')));
  const seen = new Set<string>();
  const show = (lines: LogLine[]) => {
    for (const l of lines) {
      if (seen.has(l.eventId)) continue;
      seen.add(l.eventId);
      io.stdout(p.json ? JSON.stringify(l) : renderLine(l));
      startTime = Math.max(startTime, l.timestamp);
    }
  };
  show(await readLogs({ group, region, startTime, filter, endpoint }));
  if (!p.values.follow) return 0;
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  while (!stop.signal.aborted) {
    await new Promise((resolve) => setTimeout(resolve, 2000).unref());
    // from the newest time seen (events of the same millisecond are deduplicated by id)
    show(await readLogs({ group, region, startTime, filter, endpoint }));
  }
  return 0;
}

export const command: Command = {
  name: 'cloud logs',
  usage:
    'esopt cloud logs box|episode|api [--since 1h|15m|ISO] [--filter TERM] [--follow] [--outputs .sst/outputs.json] [--group G] [--region R] [--json]\n' +
    "  the boxes' service logs (every box's stream), or the Episode or Api function's, from CloudWatch Logs; the groups from the outputs `sst deploy` wrote.\n" +
    '  --follow polls every 2 s until Ctrl-C; --json prints one event per line. Endpoint override: AWS_ENDPOINT_URL_CLOUDWATCH_LOGS',
  run,
};
