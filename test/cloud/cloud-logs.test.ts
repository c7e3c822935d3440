/**
 * The boxes' logs in CloudWatch, against the local CloudWatch Logs endpoint with the real SDK client: the
 * service's pino lines shipped by boxLogger (token redacted, order kept, AWS's batch limits held, nothing lost
 * while the group is unreachable, a full buffer said so), and `esopt cloud logs` reading them back.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLogsEndpoint, type LogsEndpoint } from '../../trainer/dev/local-cloud/logs-endpoint.ts';
import { command, renderLine, sinceMs } from '../../trainer/cli/commands/cloud-logs.ts';
import { boxLogger } from '../../trainer/cloud/box/box-logger.ts';
import { CloudWatchLogStream } from '../../trainer/cloud/box/cloudwatch-log-stream.ts';

const TOKEN = 'cloud-logs-test-token-0123456789';
const GROUP = '/esopt/test/boxes';
const CREDENTIALS = { AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE', AWS_SECRET_ACCESS_KEY: 'cloud-logs-test' };
let logs: LogsEndpoint;
const saved = { ...process.env };
const dir = mkdtempSync(join(tmpdir(), 'esopt-cloud-logs-'));

beforeAll(async () => {
  logs = await startLogsEndpoint([GROUP]);
  Object.assign(process.env, CREDENTIALS);
});
afterAll(async () => {
  await logs.close();
  for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
  Object.assign(process.env, saved);
});

async function createGroup(name: string) {
  const { CloudWatchLogsClient, CreateLogGroupCommand } = await import('@aws-sdk/client-cloudwatch-logs');
  const client = new CloudWatchLogsClient({ region: 'us-east-1', endpoint: logs.url });
  await client.send(new CreateLogGroupCommand({ logGroupName: name }));
  client.destroy();
}

async function cli(...argv: string[]) {
  const out: string[] = [];
  const code = await command.run(argv, { stdout: (t) => out.push(t), stderr: () => {}, readStdin: async () => '' });
  return { code, lines: out };
}

describe("the boxes' service log in CloudWatch", () => {
  it('ships every line of the box logger in order to its stream, the token redacted', async () => {
    const logger = boxLogger('esopt-trainer-box', { ESOPT_LOG_GROUP: GROUP, ESOPT_LOG_STREAM: 'trainer', ESOPT_TOKEN: TOKEN, AWS_REGION: 'us-east-1', AWS_ENDPOINT_URL_CLOUDWATCH_LOGS: logs.url, ...CREDENTIALS });
    for (let i = 0; i < 5; i++) logger.log.info({ iteration: i }, `iteration ${i} done`);
    logger.log.error({ header: `Bearer ${TOKEN}` }, 'a request failed');
    await logger.close();
    const events = logs.events(GROUP).filter((e) => e.logStreamName === 'trainer');
    expect(events.map((e) => JSON.parse(e.message).msg)).toEqual(['iteration 0 done', 'iteration 1 done', 'iteration 2 done', 'iteration 3 done', 'iteration 4 done', 'a request failed']);
    expect(events.every((e) => !e.message.includes(TOKEN))).toBe(true);
    expect(events[5]!.message).toContain('Bearer [redacted]');
    // each event carries the line's own time
    expect(events.map((e) => e.timestamp)).toEqual(events.map((e) => JSON.parse(e.message).time));
  });

  it('keeps the lines while the group is unreachable and ships them all once it is there', async () => {
    const group = '/esopt/test/late';
    const errors: string[] = [];
    const stream = new CloudWatchLogStream({ group, stream: 'replica-1', region: 'us-east-1', endpoint: logs.url, flushMs: 60_000, onError: (e) => errors.push(e.name) });
    for (let i = 0; i < 3; i++) stream.write(`${JSON.stringify({ level: 30, time: Date.now() + i, msg: `line ${i}` })}\n`);
    await stream.flush();
    expect(errors).toEqual(['ResourceNotFoundException']);
    await createGroup(group);
    stream.write(`${JSON.stringify({ level: 30, time: Date.now() + 10, msg: 'line 3' })}\n`);
    await stream.close();
    expect(logs.events(group).map((e) => JSON.parse(e.message).msg)).toEqual(['line 0', 'line 1', 'line 2', 'line 3']);
  });

  it("splits a flush into puts within AWS's 10,000-event limit, and says how many lines a full buffer dropped", async () => {
    const group = '/esopt/test/many';
    await createGroup(group);
    const before = logs.actions.filter((a) => a === 'PutLogEvents').length;
    const many = new CloudWatchLogStream({ group, stream: 'trainer', region: 'us-east-1', endpoint: logs.url, flushMs: 60_000 });
    const t0 = Date.now();
    for (let i = 0; i < 12_000; i++) many.write(`{"level":30,"time":${t0 + i},"msg":"${i}"}\n`);
    await many.close();
    expect(logs.actions.filter((a) => a === 'PutLogEvents').length - before).toBe(2);
    expect(logs.events(group)).toHaveLength(12_000);

    const full = '/esopt/test/full';
    const small = new CloudWatchLogStream({ group: full, stream: 'trainer', region: 'us-east-1', endpoint: logs.url, flushMs: 60_000, maxBuffered: 5 });
    for (let i = 0; i < 8; i++) small.write(`{"level":30,"time":${t0 + i},"msg":"${i}"}\n`);
    await small.flush();
    await createGroup(full);
    await small.close();
    expect(logs.events(full).map((e) => e.message)).toEqual(['[3 log lines dropped: CloudWatch was unreachable and the buffer was full]', ...[3, 4, 5, 6, 7].map((i) => `{"level":30,"time":${t0 + i},"msg":"${i}"}`)]);
  });
});

describe('esopt cloud logs', () => {
  it('prints the group the stack outputs name, one line an event, level and message from pino lines', async () => {
    const outputs = join(dir, 'outputs.json');
    writeFileSync(outputs, JSON.stringify({ bucket: 'esopt-test-runs', boxLogGroup: GROUP, episodeLogGroup: '/aws/lambda/esopt-test-Episode', apiLogGroup: '/aws/lambda/esopt-test-Api' }));
    process.env.AWS_ENDPOINT_URL_CLOUDWATCH_LOGS = logs.url;
    const { code, lines } = await cli('box', '--outputs', outputs, '--since', '1h');
    expect(code).toBe(0);
    expect(lines.filter((l) => /^\d{4}-\d\d-\d\dT[\d:.]+Z trainer INFO iteration 0 done$/.test(l))).toHaveLength(1);
    expect(lines.filter((l) => / trainer (INFO|ERROR) /.test(l))).toHaveLength(6);
    const json = await cli('box', '--outputs', outputs, '--json', '--filter', 'request failed');
    expect(json.lines.map((l) => JSON.parse(l).stream)).toEqual(['trainer']);
    // a time after every event: nothing
    expect((await cli('box', '--outputs', outputs, '--since', new Date(Date.now() + 60_000).toISOString())).lines).toEqual([]);
    await expect(cli('episode', '--outputs', outputs)).rejects.toThrow(/log group \/aws\/lambda\/esopt-test-Episode does not exist yet/);
    await expect(cli('boxes', '--outputs', outputs)).rejects.toThrow(/read box, episode or api/);
    await expect(cli('box', '--outputs', join(dir, 'missing.json'))).rejects.toThrow(/--outputs/);
  });

  it('reads --since as a duration or an ISO time, and renders non-JSON lines as they came', () => {
    const now = Date.parse('2026-12-05T12:00:00.000Z');
    expect(sinceMs('15m', now)).toBe(now - 15 * 60_000);
    expect(sinceMs('2h', now)).toBe(now - 2 * 3_600_000);
    expect(sinceMs('2026-12-05T11:00:00Z', now)).toBe(now - 3_600_000);
    expect(() => sinceMs('yesterday', now)).toThrow(/--since yesterday/);
    expect(renderLine({ timestamp: now, stream: '2026/12/05/[$LATEST]abc', message: 'START RequestId: 1 Version: $LATEST\n', eventId: '1' })).toBe('2026-12-05T12:00:00.000Z 2026/12/05/[$LATEST]abc START RequestId: 1 Version: $LATEST');
  });
});
