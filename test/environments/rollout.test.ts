/**
 * The `rollout` kind end to end: the real Episode handler, the real inference server (tiny ONNX engine,
 * bearer token) and the Python example agent (examples/rollout/agent.py) as an endpoint and as a command;
 * then hostile agents — one that never calls its model, one that echoes its key, bad answers, a slow one, a
 * redirect — each a failed episode with its reason; and a one-iteration embedded run trained through it.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ask } from '../../shared/es.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { RewardRecord, RunConfig, type EpisodeRequest } from '../../shared/schemas/index.ts';
import { keys } from '../../shared/keys.ts';
import { readJson } from '../../shared/store/json.ts';
import { createEpisodeHandler } from '../../functions/episode.ts';
import { DEPLOYED_CONTEXT } from '../../environments/environment.ts';
import { EMBEDDED_OUTBOUND } from '../../environments/outbound/address-policy.ts';
import { rollout } from '../../environments/rollout/definition.ts';
import type { Engine } from '../../trainer/engine/engine.ts';
import { createEngine } from '../../trainer/engine/model/create-engine.ts';
import { startInferenceServer, type RunningServer } from '../../trainer/serving/server.ts';
import { runEmbedded } from '../../trainer/assembly/run.ts';
import { silentProgress } from '../../trainer/training/loop/index.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';

const python = spawnSync('python3', ['--version']).status === 0;
const AGENT = new URL('../../examples/rollout/agent.py', import.meta.url).pathname;
const TOKEN = 'rollout-test-token-0123456789abcdef';
const root = mkdtempSync(join(tmpdir(), 'esopt-rollout-'));
let engine: Engine;
let server: RunningServer;
let agent: ChildProcess;
let agentUrl: string;
const hostile: Server[] = [];

beforeAll(async () => {
  engine = await createEngine({ model: { preset: 'tiny', seed: 0 }, mode: 'full' });
  server = await startInferenceServer(engine, { token: TOKEN });
  server.service.setPopulation({ runSeed: 1, iteration: 0, sigma: 0.05, rank: 1, members: ask({ population: 2, antithetic: true }) });
  if (python) {
    agent = spawn('python3', [AGENT, '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
    const port = await new Promise<string>((resolve) => agent.stdout!.once('data', (d: Buffer) => resolve(d.toString().trim())));
    agentUrl = `http://127.0.0.1:${port}/rollout`;
  }
}, 30_000);
afterAll(async () => {
  agent?.kill();
  for (const h of hostile) h.close();
  await server.close();
  await engine.close();
  rmSync(root, { recursive: true, force: true });
});

/** A Node server playing a hostile agent: `play` gets the request and answers. */
async function agentServer(play: (request: { inference: { baseUrl: string; apiKey: string; model: string } }, res: import("node:http").ServerResponse) => unknown): Promise<string> {
  const s = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c));
    req.on('end', () => void play(JSON.parse(body), res));
  });
  hostile.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}/rollout`;
}

let n = 0;
async function episode(
  options: Record<string, unknown>,
  o: { context?: typeof DEPLOYED_CONTEXT; member?: 0 | 'base'; task?: Record<string, unknown>; keyEnv?: string; env?: Record<string, string>; keysFromEnv?: boolean } = {},
): Promise<RewardRecord> {
  const store = new FsObjectStore(join(root, `store-${n}`));
  const handle = createEpisodeHandler({
    store,
    env: { ESOPT_TOKEN: TOKEN, ...o.env },
    environmentKeysFromEnv: o.keysFromEnv ?? true,
    memoryMb: 0,
    billedPerInvocation: false,
    prices: measuredPrices(),
    log: { info() {}, error() {} },
    environmentContext: o.context ?? { outbound: EMBEDDED_OUTBOUND, allowCommands: true },
  });
  const member = o.member ?? 0;
  const request: EpisodeRequest = {
    run: `rollout-${n++}`,
    iteration: 0,
    member,
    task: { id: 'rollout-task-1', value: o.task ?? { question: 'Say 7', answer: '7' } },
    environment: { name: 'rollout', options, ...(o.keyEnv ? { keyEnv: o.keyEnv } : {}) },
    policy: { baseUrl: `${server.url}/v1`, model: member === 'base' ? 'base' : 'member-0-0', tokenEnv: 'ESOPT_TOKEN' },
    generation: { temperature: 0, topP: 1, topK: 0, maxTokens: 8 },
    seed: 3,
    deadline: new Date(Date.now() + 20_000).toISOString(),
  };
  const response = await handle(request);
  expect(response.ok).toBe(true);
  return (await readJson(store, keys.reward(request.run, 0, member, 'rollout-task-1'), RewardRecord))!;
}

describe.skipIf(!python)('rollout: the Python example agent', () => {
  it('plays an episode as an endpoint: its calls and tokens are counted, its reward recorded', async () => {
    const record = await episode({ url: agentUrl });
    expect(record.error).toBeNull();
    expect(record.steps).toBe(2); // the agent's two chat completions, as the server counted them
    expect(record.tokens.prompt).toBeGreaterThan(0);
    expect(record.tokens.completion).toBeGreaterThan(0);
    expect(record.reward).toBeGreaterThanOrEqual(0);
    expect(record.reward).toBeLessThanOrEqual(1);
  }, 30_000);

  it('plays an episode as a local command in an embedded run, and is refused one on a deployed stack', async () => {
    const record = await episode({ command: ['python3', AGENT, '--stdio'] }, { member: 'base' });
    expect(record.error).toBeNull();
    expect(record.steps).toBe(2);
    const deployed = await episode({ command: ['python3', AGENT, '--stdio'] }, { context: DEPLOYED_CONTEXT });
    expect(deployed.error).toMatch(/only in embedded runs/);
  }, 30_000);

  it('trains: a one-iteration embedded run whose members are played by the agent', async () => {
    const demo = JSON.parse(readFileSync(new URL('../../configs/demo.json', import.meta.url), 'utf8'));
    const config = RunConfig.parse({
      ...demo,
      environment: { name: 'rollout', options: { url: agentUrl } },
      tasks: { seed: 1, trainPerIteration: 2, evalCount: 2 },
      es: { ...demo.es, population: 4 },
      generation: { temperature: 0, topP: 1, topK: 0, maxTokens: 8 },
      iterations: 1,
      evalInterval: 1,
      checkpointInterval: 1,
      workers: 2,
      localEpisodes: 'worker-processes',
    });
    expect(RunConfig.safeParse({ ...config, localEpisodes: 'in-process' }).error?.issues[0]?.path).toEqual(['localEpisodes']);
    const { result } = await runEmbedded({ config, run: 'rollout-run', storeRoot: join(root, 'run'), token: TOKEN, progress: silentProgress });
    expect(result.rows).toHaveLength(1);
    expect(result.rows[0]!.topError ?? null, JSON.stringify(result.rows[0])).toBeNull();
    expect(result.rows[0]!.failed).toBe(0);
    expect(result.rows[0]!.counted).toBe(8);
    expect(result.evaluations.map((e) => e.iteration)).toEqual([0, 1]);
  }, 120_000);
});

describe('rollout: hostile agents', () => {
  it('refuses the reward of an agent that never called its model', async () => {
    const url = await agentServer((_r, res) => res.end(JSON.stringify({ reward: 1 })));
    const record = await episode({ url });
    expect(record.error).toMatch(/never called its member's model/);
    expect(record.reward).toBe(0);
  });

  it("sends the environment key named by keyEnv to the agent's endpoint only, and never stores it", async () => {
    let seen = '';
    const url = await agentServer(async (r, res) => {
      await fetch(`${r.inference.baseUrl}/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${r.inference.apiKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'x', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }) });
      res.end(JSON.stringify({ reward: 0.25, info: { echoed: seen } }));
    });
    hostile.at(-1)!.prependListener('request', (req) => (seen = String(req.headers.authorization)));
    const record = await episode({ url }, { member: 'base', keyEnv: 'AGENT_KEY', env: { AGENT_KEY: 'agent-secret-key-123' } });
    expect(seen).toBe('Bearer agent-secret-key-123');
    expect(record.error).toBeNull();
    const stored = Buffer.from((await new FsObjectStore(join(root, `store-${n - 1}`)).get(record.transcriptKey!))!).toString();
    expect(stored).not.toContain('agent-secret-key-123');
    const refused = await episode({ url }, { keyEnv: 'AGENT_KEY', env: { AGENT_KEY: 'x' }, keysFromEnv: false });
    expect(refused.error).toMatch(/keyEnv is for embedded runs/);
  });

  it('never stores or logs the key an agent echoes back', async () => {
    let key = '';
    const url = await agentServer(async (r, res) => {
      key = r.inference.apiKey;
      await fetch(`${r.inference.baseUrl}/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'x', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }) });
      res.end(JSON.stringify({ reward: 0.5, info: { echoed: key } }));
    });
    const record = await episode({ url }, { member: 'base' });
    expect(record.error).toBeNull();
    expect(record.reward).toBe(0.5);
    const transcript = new FsObjectStore(join(root, `store-${n - 1}`));
    const stored = Buffer.from((await transcript.get(record.transcriptKey!))!).toString();
    expect(key).toMatch(/^esr_/);
    expect(stored).not.toContain(key);
    expect(stored).toContain('[redacted]');
    // and the key was revoked once the episode ended
    const after = await fetch(`${server.url}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
    expect(after.status).toBe(401);
  });

  it('fails bad answers with a fixed reason, never the body', async () => {
    const cases: [(res: import('node:http').ServerResponse) => void, RegExp][] = [
      [(res) => res.end('secret internal page'), /not JSON/],
      [(res) => res.end(JSON.stringify({ reward: 'high' })), /reward/],
      [(res) => res.end('{"reward": 1e999}'), /reward/],
      [(res) => res.writeHead(500).end('stack trace here'), /HTTP 500/],
      [(res) => res.writeHead(302, { location: 'http://169.254.169.254/' }).end(), /redirect/],
      [(res) => res.end(JSON.stringify({ reward: 1, info: { pad: 'x'.repeat(100_000) } })), /passed 65536 bytes/],
    ];
    for (const [answer, reason] of cases) {
      const url = await agentServer((_r, res) => answer(res));
      const record = await episode({ url });
      expect(record.error, String(reason)).toMatch(reason);
      expect(record.error).not.toMatch(/secret internal page|stack trace/);
    }
  });

  it('ends a rollout that takes longer than its limit', async () => {
    const url = await agentServer(() => undefined); // never answers
    const started = Date.now();
    const record = await episode({ url, timeoutMs: 1_000 });
    expect(record.error).toMatch(/no complete answer within/);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('refuses a loopback agent on a deployed stack before calling it', async () => {
    let called = false;
    const url = await agentServer((_r, res) => ((called = true), res.end('{}')));
    const record = await episode({ url }, { context: DEPLOYED_CONTEXT });
    expect(record.error).toMatch(/only for a server on this machine/);
    expect(called).toBe(false);
  });

  it('has no scripted policies and no reset/step', async () => {
    expect(() => rollout.oracle({}, { url: 'https://a.example/rollout', timeoutMs: 1000, maxResponseBytes: 1000 })).toThrow(/played by your agent/);
    await expect(rollout.create({}, { url: 'https://a.example/rollout', timeoutMs: 1000, maxResponseBytes: 1000 })).rejects.toThrow(/played by your agent/);
    expect(rollout.optionsSchema.safeParse({}).success).toBe(false);
    expect(rollout.optionsSchema.safeParse({ url: 'https://a.example', command: ['x'] }).success).toBe(false);
  });
});
