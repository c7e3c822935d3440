/**
 * A CloudWatch Logs-compatible endpoint on loopback (the AWS JSON 1.1 protocol `@aws-sdk/client-cloudwatch-logs`
 * speaks: `POST /` with `X-Amz-Target: Logs_20140328.<Action>`) holding groups, streams and events in memory, for
 * the rehearsal and the tests, as the local SSM endpoint stands in for Parameter Store. It serves what the
 * boxes and `esopt cloud logs` use: CreateLogGroup, CreateLogStream, PutLogEvents (events in time order, at most
 * 10,000 and 1 MiB a call, as AWS requires) and FilterLogEvents (time window, a plain-term filter, paging by
 * nextToken), and answers AWS's errors for the rest.
 */
import { serve, type ServerType } from '@hono/node-server';
import { Hono, type Context } from 'hono';
import type { AddressInfo } from 'node:net';

export interface StoredLogEvent {
  logStreamName: string;
  timestamp: number;
  message: string;
  ingestionTime: number;
  eventId: string;
}

export interface LogsEndpoint {
  url: string;
  /** Every event of a group, in time order. */
  events(group: string): StoredLogEvent[];
  /** Actions asked, in order. */
  actions: string[];
  close(): Promise<void>;
}

const MAX_EVENTS = 10_000;
const MAX_BATCH_BYTES = 1_048_576;
const PAGE = 100;

function awsError(c: Context, type: string, message: string) {
  c.header('x-amzn-ErrorType', type);
  return c.body(JSON.stringify({ __type: type, message }), 400, { 'content-type': 'application/x-amz-json-1.1' });
}

export async function startLogsEndpoint(groups: string[] = []): Promise<LogsEndpoint> {
  const store = new Map<string, Map<string, StoredLogEvent[]>>(groups.map((g) => [g, new Map()]));
  const actions: string[] = [];
  let nextId = 0;
  const app = new Hono();
  app.post('/', async (c) => {
    const action = (c.req.header('x-amz-target') ?? '').replace(/^Logs_20140328\./, '');
    actions.push(action);
    const input = (await c.req.json().catch(() => ({}))) as Record<string, unknown>;
    const reply = (body: unknown) => c.body(JSON.stringify(body), 200, { 'content-type': 'application/x-amz-json-1.1' });
    const groupName = String(input.logGroupName ?? '');
    const group = store.get(groupName);
    switch (action) {
      case 'CreateLogGroup':
        if (group) return awsError(c, 'ResourceAlreadyExistsException', 'The specified log group already exists');
        store.set(groupName, new Map());
        return reply({});
      case 'CreateLogStream': {
        if (!group) return awsError(c, 'ResourceNotFoundException', 'The specified log group does not exist.');
        const stream = String(input.logStreamName ?? '');
        if (!stream || /[:*]/.test(stream)) return awsError(c, 'InvalidParameterException', 'logStreamName may not be empty or contain : or *');
        if (group.has(stream)) return awsError(c, 'ResourceAlreadyExistsException', 'The specified log stream already exists');
        group.set(stream, []);
        return reply({});
      }
      case 'PutLogEvents': {
        if (!group) return awsError(c, 'ResourceNotFoundException', 'The specified log group does not exist.');
        const streamName = String(input.logStreamName ?? '');
        const stream = group.get(streamName);
        if (!stream) return awsError(c, 'ResourceNotFoundException', 'The specified log stream does not exist.');
        const events = (input.logEvents ?? []) as { timestamp: number; message: string }[];
        if (!events.length || events.length > MAX_EVENTS) return awsError(c, 'InvalidParameterException', `logEvents must hold 1 to ${MAX_EVENTS} events`);
        const bytes = events.reduce((a, e) => a + Buffer.byteLength(e.message) + 26, 0);
        if (bytes > MAX_BATCH_BYTES) return awsError(c, 'InvalidParameterException', `the batch is ${bytes} bytes, over ${MAX_BATCH_BYTES}`);
        for (let i = 1; i < events.length; i++) {
          if (events[i]!.timestamp < events[i - 1]!.timestamp) return awsError(c, 'InvalidParameterException', 'Log events in a single PutLogEvents request must be in chronological order.');
        }
        const now = Date.now();
        for (const e of events) stream.push({ logStreamName: streamName, timestamp: e.timestamp, message: e.message, ingestionTime: now, eventId: String(nextId++).padStart(12, '0') });
        return reply({ nextSequenceToken: String(nextId) });
      }
      case 'FilterLogEvents': {
        if (!group) return awsError(c, 'ResourceNotFoundException', 'The specified log group does not exist.');
        const start = typeof input.startTime === 'number' ? input.startTime : -Infinity;
        const end = typeof input.endTime === 'number' ? input.endTime : Infinity;
        const term = typeof input.filterPattern === 'string' && input.filterPattern ? input.filterPattern.replace(/^"|"$/g, '') : null;
        const all = [...group.values()].flat().filter((e) => e.timestamp >= start && e.timestamp <= end && (term === null || e.message.includes(term)));
        all.sort((a, b) => a.timestamp - b.timestamp || a.eventId.localeCompare(b.eventId));
        const from = typeof input.nextToken === 'string' ? Number(input.nextToken) : 0;
        const page = all.slice(from, from + Math.min(Number(input.limit ?? PAGE), PAGE));
        return reply({ events: page, searchedLogStreams: [], ...(from + page.length < all.length ? { nextToken: String(from + page.length) } : {}) });
      }
      default:
        return awsError(c, 'UnknownOperationException', `${action} is not served by the local CloudWatch Logs endpoint`);
    }
  });
  const server: ServerType = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    actions,
    events: (g) => [...(store.get(g)?.values() ?? [])].flat().sort((a, b) => a.timestamp - b.timestamp),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
