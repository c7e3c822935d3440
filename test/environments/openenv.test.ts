import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import type { Policy, PolicyReply } from '../../shared/ports/policy.ts';
import { DEPLOYED_CONTEXT, type EnvironmentContext } from '../../environments/environment.ts';
import { runEpisode } from '../../environments/episode-runner.ts';
import { openenv, randomOf } from '../../environments/openenv/definition.ts';
import { SeededRandom } from '../../environments/random.ts';

function play(input: Record<string, unknown>, policy: Policy, seed: number) {
  return runEpisode({ ...input, policy, seed } as Parameters<typeof runEpisode>[0]);
}

const hasPython = spawnSync('python3', ['--version']).status === 0;
const EMBEDDED: EnvironmentContext = { outbound: { allow: ['loopback'] }, allowCommands: false };
const none = { tokens: { prompt: 0, completion: 0 }, inferenceMs: 0 };

/** Binary search over 1..16, reading the hints: the reference game's solution. */
function bisect(): Policy {
  let lo = 1;
  let hi = 16;
  let last = 0;
  return {
    async act(messages): Promise<PolicyReply> {
      const seen = messages.at(-1)!.content;
      if (seen.includes('higher')) lo = last + 1;
      if (seen.includes('lower')) hi = last - 1;
      last = Math.floor((lo + hi) / 2);
      return { text: '', toolCalls: [{ name: 'act', arguments: { guess: last } }], ...none };
    },
  };
}

describe.skipIf(!hasPython)('openenv against the Python reference server', () => {
  let child: ChildProcess;
  let url = '';
  beforeAll(async () => {
    child = spawn('python3', ['examples/openenv/server.py', '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
    const port = await new Promise<string>((resolve) => child.stdout!.once('data', (d: Buffer) => resolve(d.toString().trim())));
    url = `http://127.0.0.1:${port}`;
  });
  afterAll(() => {
    child.kill();
  });

  it('turns the action schema into a tool and plays an episode to a reward', async () => {
    const env = await openenv.create(openenv.taskSchema.parse({ seed: 7 }), openenv.optionsSchema.parse({ url }), EMBEDDED);
    expect(env.tools?.[0]?.name).toBe('act');
    expect((env.tools?.[0]?.parameters as { properties: object }).properties).toHaveProperty('guess');
    await env.close();
    const result = await play({ definition: openenv, task: { seed: 7 }, options: { url }, context: EMBEDDED }, bisect(), 0);
    expect(result.error).toBeNull();
    expect(result.stopReason).toBe('done');
    expect(result.reward).toBeGreaterThan(0.7);
  });

  it('keeps two concurrent episodes apart (one /ws session each)', async () => {
    const [a, b] = await Promise.all([3, 11].map((seed) => play({ definition: openenv, task: { seed }, options: { url }, context: EMBEDDED }, bisect(), 0)));
    expect(a!.reward).toBeGreaterThan(0.7);
    expect(b!.reward).toBeGreaterThan(0.7);
  });

  it('plays random actions from the schema, and says there is no oracle', async () => {
    const [task] = openenv.sampleTasks('train', 1, 0, openenv.optionsSchema.parse({ url }));
    const options = openenv.optionsSchema.parse({ url });
    const result = await play({ definition: openenv, task: task!.task, options, context: EMBEDDED }, openenv.random(task!.task, options, 1), 0);
    expect(result.error).toBeNull();
    expect(result.steps).toBeGreaterThan(0);
    expect(() => openenv.oracle(task!.task, options)).toThrow(/no oracle/);
  });

  it('json mode and the http transport also play', async () => {
    const text: Policy = { act: async () => ({ text: 'I say {"guess": 8}', ...none }) };
    const r = await play({ definition: openenv, task: { seed: 1 }, options: { url, transport: 'http', action: { as: 'json' }, horizon: 1 }, context: EMBEDDED }, text, 0);
    expect(r.error).toBeNull();
    expect(r.steps).toBe(1);
  });

  it('refuses loopback under the deployed context', async () => {
    const r = await play({ definition: openenv, task: { seed: 1 }, options: { url }, context: DEPLOYED_CONTEXT }, bisect(), 0);
    expect(r.stopReason).toBe('error');
    expect(r.error).toMatch(/only for a server on this machine/);
  });
});

/** A server misbehaving one way: `/schema` is right, the /ws session is not. */
async function hostile(onMessage: (send: (s: string | Buffer) => void) => void, schema: (res: import('node:http').ServerResponse) => void = (res) => res.end(JSON.stringify({ action: { type: 'object', properties: { x: { type: 'integer' } } } }))): Promise<{ server: Server; url: string; auth: string[] }> {
  const auth: string[] = [];
  const server = createServer((req, res) => {
    auth.push(req.headers.authorization ?? '');
    schema(res);
  });
  const wss = new WebSocketServer({ server });
  wss.on('connection', (socket, req) => {
    auth.push(req.headers.authorization ?? '');
    socket.on('message', () => onMessage((s) => socket.send(s)));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, auth };
}

describe('openenv against hostile servers: a failed episode with a fixed reason, in bounded time', () => {
  const obs = JSON.stringify({ type: 'observation', data: { observation: { m: 'hi' }, reward: null, done: false } });
  const cases: [string, (send: (s: string | Buffer) => void) => void, RegExp][] = [
    ['non-JSON', (send) => send('<html>oops secret-body</html>'), /not JSON/],
    ['wrong shape', (send) => send(JSON.stringify({ type: 'observation', data: { obs: 1 } })), /not \{observation/],
    ['huge reward', (send) => send(JSON.stringify({ type: 'observation', data: { observation: {}, reward: 1e300, done: false } })), /beyond/],
    ['silence', () => undefined, /did not answer/],
    ['huge message', (send) => send('x'.repeat(5000)), /passed 1024 bytes/],
    ['an error', (send) => send(JSON.stringify({ type: 'error', data: { message: 'secret-body', code: 'EXECUTION_ERROR' } })), /EXECUTION_ERROR/],
    // Found by test/reliability/fuzz-openenv.test.ts: a binary answer once left its call waiting for ever.
    ['a binary message', (send) => send(Buffer.from(obs)), /binary \/ws message/],
  ];
  for (const [name, behaviour, reason] of cases) {
    it(name, async () => {
      let first = true;
      const { server, url } = await hostile((send) => (first ? ((first = false), send(obs)) : behaviour(send)));
      const started = Date.now();
      const options = { url, callTimeoutMs: 500, maxResponseBytes: 1024 };
      const r = await play({ definition: openenv, task: { seed: 1 }, options, context: EMBEDDED }, openenv.random({ seed: 1 }, openenv.optionsSchema.parse(options), 0), 0);
      server.close();
      server.closeAllConnections();
      expect(r.stopReason).toBe('error');
      expect(r.error).toMatch(reason);
      expect(r.error).not.toMatch(/secret-body/);
      expect(Date.now() - started).toBeLessThan(5000);
    });
  }

  it('the random policy plays any action schema a server sends, without throwing (found by the fuzz)', () => {
    const random = new SeededRandom(1);
    const deep = JSON.parse(`${'{"anyOf":['.repeat(10_000)}{}${']}'.repeat(10_000)}`) as unknown;
    for (const schema of [
      { type: 'integer', minimum: 0.5, maximum: 0.6 },
      { type: 'integer', minimum: 1e308, maximum: -1e308 },
      { type: 'integer', minimum: -1e308, maximum: 1e308 },
      { type: 'number', minimum: -1e308, maximum: 1e308 },
      { enum: [] },
      { anyOf: [] },
      { type: 'object', properties: 'abc' },
      { type: 'array', items: [1, 2] },
      deep,
      null,
      [],
    ]) {
      const value = randomOf({ type: 'object', properties: { x: schema } }, random) as { x: unknown };
      expect(JSON.stringify(value).length).toBeLessThan(10_000);
      if (typeof value.x === 'number') expect(Number.isFinite(value.x)).toBe(true);
    }
  });

  it('an observation or action schema nested past 64 levels fails with a fixed reason, not a stack overflow (found by the fuzz)', async () => {
    const deep = `{"type":"observation","data":{"observation":{"a":${'['.repeat(5_000)}${']'.repeat(5_000)}},"reward":0,"done":false}}`;
    const observing = await hostile((send) => send(deep));
    const r = await play({ definition: openenv, task: { seed: 1 }, options: { url: observing.url }, context: EMBEDDED }, openenv.random({ seed: 1 }, openenv.optionsSchema.parse({ url: observing.url }), 0), 0);
    observing.server.close();
    observing.server.closeAllConnections();
    expect(r.error).toBe("the server's reset observation nests deeper than 64 levels");
    const schema = `{"action":{"type":"object","properties":{"x":${'{"type":"array","items":'.repeat(2_000)}{}${'}'.repeat(2_000)}}}}`;
    const describing = await hostile(() => undefined, (res) => res.end(schema));
    const s = await play({ definition: openenv, task: { seed: 1 }, options: { url: describing.url }, context: EMBEDDED }, openenv.random({ seed: 1 }, openenv.optionsSchema.parse({ url: describing.url }), 0), 0);
    describing.server.close();
    describing.server.closeAllConnections();
    expect(s.error).toBe("the server's /schema action JSON Schema nests deeper than 64 levels");
  });

  it('a never-done server is ended by the horizon', async () => {
    const { server, url } = await hostile((send) => send(obs));
    const options = { url, horizon: 3 };
    const r = await play({ definition: openenv, task: { seed: 1 }, options, context: EMBEDDED }, openenv.random({ seed: 1 }, openenv.optionsSchema.parse(options), 0), 0);
    server.close();
    server.closeAllConnections();
    expect(r.stopReason).toBe('horizon');
  });

  it('5xx and redirects on /schema, and a refused connection, fail clearly', async () => {
    for (const [status, reason] of [[503, /HTTP 503/], [302, /redirect/]] as const) {
      const { server, url } = await hostile(() => undefined, (res) => {
        res.writeHead(status, { location: 'http://169.254.169.254/' });
        res.end('secret-body');
      });
      const r = await play({ definition: openenv, task: { seed: 1 }, options: { url }, context: EMBEDDED }, openenv.random({ seed: 1 }, openenv.optionsSchema.parse({ url }), 0), 0);
      server.close();
      server.closeAllConnections();
      expect(r.error).toMatch(reason);
    }
    const r = await play({ definition: openenv, task: { seed: 1 }, options: { url: 'http://127.0.0.1:1' }, context: EMBEDDED }, openenv.random({ seed: 1 }, openenv.optionsSchema.parse({ url: 'http://127.0.0.1:1' }), 0), 0);
    expect(r.error).toMatch(/could not reach/);
  });

  it('sends the endpoint key to its server, and keeps it out of errors', async () => {
    const { server, url, auth } = await hostile((send) => send('not json'));
    const r = await play({ definition: openenv, task: { seed: 1 }, options: { url }, context: { ...EMBEDDED, endpointKey: 'k-123' } }, openenv.random({ seed: 1 }, openenv.optionsSchema.parse({ url }), 0), 0);
    server.close();
    server.closeAllConnections();
    expect(auth.length).toBeGreaterThanOrEqual(2);
    expect(auth.every((a) => a === 'Bearer k-123')).toBe(true);
    expect(r.error).not.toMatch(/k-123/);
  });
});
