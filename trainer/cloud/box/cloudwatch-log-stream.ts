/**
 * A log destination that ships a box's service log to CloudWatch Logs (one stream per box in the stack's
 * group), for pino's multistream beside stderr. Lines are buffered and put every `flushMs` in batches within
 * AWS's limits (10,000 events, 1 MiB with 26 bytes of overhead an event, 256 KiB an event, time order). A put
 * that fails keeps its lines for the next try; past `maxBuffered` lines the oldest are dropped and the next
 * batch says how many. Known secrets are replaced by `[redacted]` before a line leaves the box.
 */
import type { CloudWatchLogsClient } from '@aws-sdk/client-cloudwatch-logs';

export interface CloudWatchLogStreamOptions {
  group: string;
  stream: string;
  region: string;
  endpoint?: string;
  /** Values never shipped (the bearer token). */
  secrets?: string[];
  flushMs?: number;
  maxBuffered?: number;
  /** Why a put failed, for the local log only (never shipped, so it cannot loop). */
  onError?: (err: Error) => void;
}

interface Pending {
  timestamp: number;
  message: string;
}

const MAX_EVENTS = 10_000;
const MAX_BATCH_BYTES = 1_048_576;
const EVENT_OVERHEAD = 26;
const MAX_EVENT_BYTES = 262_144 - EVENT_OVERHEAD;

export class CloudWatchLogStream {
  private pending: Pending[] = [];
  private dropped = 0;
  private streamMade = false;
  private flushing: Promise<void> = Promise.resolve();
  private client: Promise<CloudWatchLogsClient> | null = null;
  private readonly timer: NodeJS.Timeout;
  private readonly secrets: string[];

  constructor(private readonly o: CloudWatchLogStreamOptions) {
    this.secrets = (o.secrets ?? []).filter((s) => s.length >= 8);
    this.timer = setInterval(() => void this.flush(), o.flushMs ?? 2000);
    this.timer.unref();
  }

  /** pino's destination interface: one serialized line (a JSON object and a newline). */
  write(line: string): void {
    let message = line.endsWith('\n') ? line.slice(0, -1) : line;
    for (const s of this.secrets) message = message.split(s).join('[redacted]');
    if (Buffer.byteLength(message) > MAX_EVENT_BYTES) message = `${Buffer.from(message).subarray(0, MAX_EVENT_BYTES - 64).toString()}… [truncated]`;
    let timestamp = Date.now();
    const time = /"time":(\d{13})/.exec(message);
    if (time) timestamp = Number(time[1]);
    this.pending.push({ timestamp, message });
    const max = this.o.maxBuffered ?? 50_000;
    if (this.pending.length > max) {
      const over = this.pending.length - max;
      this.pending.splice(0, over);
      this.dropped += over;
    }
  }

  /** Puts what is buffered now; resolves when done (failures are kept for the next flush, never thrown). */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(() => this.flushOnce());
    return this.flushing;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
    if (this.client) (await this.client).destroy();
  }

  private sdk(): Promise<CloudWatchLogsClient> {
    this.client ??= import('@aws-sdk/client-cloudwatch-logs').then(({ CloudWatchLogsClient }) => new CloudWatchLogsClient({ region: this.o.region, maxAttempts: 3, ...(this.o.endpoint ? { endpoint: this.o.endpoint } : {}) }));
    return this.client;
  }

  private async flushOnce(): Promise<void> {
    if (!this.pending.length && !this.dropped) return;
    const { CreateLogStreamCommand, PutLogEventsCommand } = await import('@aws-sdk/client-cloudwatch-logs');
    const client = await this.sdk();
    try {
      if (!this.streamMade) {
        await client.send(new CreateLogStreamCommand({ logGroupName: this.o.group, logStreamName: this.o.stream })).catch((err: Error) => {
          if (err.name !== 'ResourceAlreadyExistsException') throw err;
        });
        this.streamMade = true;
      }
      if (this.dropped) {
        this.pending.unshift({ timestamp: this.pending[0]?.timestamp ?? Date.now(), message: `[${this.dropped} log lines dropped: CloudWatch was unreachable and the buffer was full]` });
        this.dropped = 0;
      }
      // stable by time: pino's lines are in order, but a batch must be
      const batch = this.pending.map((e, i) => ({ e, i })).sort((a, b) => a.e.timestamp - b.e.timestamp || a.i - b.i).map((x) => x.e);
      let sent = 0;
      while (sent < batch.length) {
        let bytes = 0;
        let end = sent;
        while (end < batch.length && end - sent < MAX_EVENTS) {
          const size = Buffer.byteLength(batch[end]!.message) + EVENT_OVERHEAD;
          if (bytes + size > MAX_BATCH_BYTES) break;
          bytes += size;
          end++;
        }
        await client.send(new PutLogEventsCommand({ logGroupName: this.o.group, logStreamName: this.o.stream, logEvents: batch.slice(sent, end) }));
        // what was put leaves the buffer; lines written meanwhile stay
        const put = new Set(batch.slice(sent, end));
        this.pending = this.pending.filter((p) => !put.has(p));
        sent = end;
      }
    } catch (err) {
      this.o.onError?.(err as Error);
    }
  }
}
