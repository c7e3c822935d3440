/**
 * The logger of a box's service (`esopt trainer-box`, `esopt replica-box`): pino lines on stderr (journald on
 * the box) and, where the stack names a log group (ESOPT_LOG_GROUP, ESOPT_LOG_STREAM in the box's env file),
 * the same lines in CloudWatch Logs, the token redacted, for `esopt cloud logs box`.
 */
import { pino, type Logger } from 'pino';
import { CloudWatchLogStream } from './cloudwatch-log-stream.ts';

export interface BoxLogger {
  log: Logger;
  /** Ships what is buffered; the service calls it on the way out. */
  close(): Promise<void>;
}

export function boxLogger(name: string, env: NodeJS.ProcessEnv): BoxLogger {
  const stderr = pino.destination(2);
  const group = env.ESOPT_LOG_GROUP;
  if (!group) return { log: pino({ name }, stderr), close: async () => {} };
  const shipped = new CloudWatchLogStream({
    group,
    stream: env.ESOPT_LOG_STREAM || name,
    region: env.AWS_REGION ?? 'us-east-1',
    endpoint: env.AWS_ENDPOINT_URL_CLOUDWATCH_LOGS ?? env.AWS_ENDPOINT_URL,
    secrets: [env.ESOPT_TOKEN ?? ''],
    onError: (err) => stderr.write(`${JSON.stringify({ level: 40, time: Date.now(), name, msg: `could not ship the log to CloudWatch group ${group}: ${err.message}` })}\n`),
  });
  return { log: pino({ name }, pino.multistream([{ stream: stderr }, { stream: shipped }])), close: () => shipped.close() };
}
