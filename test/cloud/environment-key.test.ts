/**
 * An endpoint key for a deployed run's environment: it comes in the X-Esopt-Environment-Key header, lands in the
 * secret store bound to the one origin the options name, and nowhere in the bucket; the stored config names only
 * the secret. The Episode function reads it and sends it to that origin alone. The local API keeps no secrets.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCloudApp } from '../../functions/http-api/cloud-app.ts';
import { createEpisodeHandler } from '../../functions/episode.ts';
import { EMBEDDED_OUTBOUND } from '../../environments/outbound/address-policy.ts';
import { keys } from '../../shared/keys.ts';
import { storeEvaluationKey } from '../../shared/secrets/evaluation-key.ts';
import { RewardRecord, RunConfig, type EpisodeRequest } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { readJson } from '../../shared/store/json.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';
import { startTestApi, tinyRunConfig } from '../api/helpers.ts';
import { MemorySecretStore } from './helpers/memory-secrets.ts';
import { STACK_CAPS } from './helpers/stack-caps.ts';

const TOKEN = 'api-token-0123456789abcdef0123456789';
const PATH = '/esopt/test/eval-keys';
const KEY = 'environment-secret-key-5f2a';
const root = mkdtempSync(join(tmpdir(), 'esopt-envkey-'));
const store = new FsObjectStore(join(root, 'bucket'));
const secrets = new MemorySecretStore();
const app = createCloudApp({ ESOPT_BUCKET: 'esopt-test-bucket', AWS_REGION: 'us-east-1', ESOPT_TOKEN: TOKEN, ESOPT_EVALUATION_KEYS: PATH, ESOPT_COST_PRICES: JSON.stringify(measuredPrices()), ...STACK_CAPS }, store, pino({ level: 'silent' }), secrets, { start: async () => undefined } as never);
afterAll(() => rmSync(root, { recursive: true, force: true }));

function post(path: string, body: unknown, headers: Record<string, string> = {}) {
  return app.request(path, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
}
function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => (statSync(join(dir, name)).isDirectory() ? filesUnder(join(dir, name)) : [join(dir, name)]));
}
const rolloutRun = (extra: Record<string, unknown> = {}) =>
  tinyRunConfig({ environment: { name: 'rollout', options: { url: 'https://agent.example.com/rollout' }, ...extra }, localEpisodes: 'worker-processes', iterations: 1, budget: { maxCostUsd: 1 } });

describe('an environment key on a deployed stack', () => {
  it('goes to the secret store bound to the endpoint origin, never to the bucket; the config names the secret', async () => {
    const res = await post('/runs', rolloutRun(), { 'x-esopt-environment-key': KEY });
    expect(res.status, await res.clone().text()).toBe(201);
    const { id } = (await res.json()) as { id: string };
    const config = (await readJson(store, keys.config(id), RunConfig))!;
    expect(config.environment.keyParameter).toMatch(new RegExp(`^${PATH}/env-[0-9a-f]{24}$`));
    const binding = JSON.parse((await secrets.get(config.environment.keyParameter!))!);
    expect(binding).toEqual({ apiKey: KEY, origin: 'https://agent.example.com' });
    for (const file of filesUnder(join(root, 'bucket'))) expect(readFileSync(file, 'utf8'), file).not.toContain(KEY);
  });

  it('is refused with the header path when the options name no endpoint, or several origins', async () => {
    const sudoku = await post('/runs', { ...tinyRunConfig(), budget: { maxCostUsd: 1 } }, { 'x-esopt-environment-key': KEY });
    expect(sudoku.status).toBe(400);
    expect(JSON.stringify(await sudoku.json())).toContain('headers.x-esopt-environment-key');
    const secretsBefore = secrets.secrets.size;
    const bad = await post('/runs', rolloutRun({ options: { url: 'https://10.0.0.1/rollout' } }), { 'x-esopt-environment-key': KEY });
    expect(bad.status).toBe(400);
    expect(secrets.secrets.size).toBe(secretsBefore); // refused before anything was stored
  });

  it('cannot be named by a request body (keyParameter is the API’s to set)', async () => {
    const res = await post('/runs', rolloutRun({ keyParameter: `${PATH}/someone-elses` }));
    expect(res.status).toBe(400);
    expect(JSON.stringify(await res.json())).toContain('environment.keyParameter');
  });

  it('is refused by the local API, which keeps no secrets', async () => {
    const api = await startTestApi();
    try {
      const res = await api.call('POST', '/runs', { body: tinyRunConfig({ environment: { name: 'rollout', options: { url: 'http://127.0.0.1:9/rollout' } }, localEpisodes: 'worker-processes' }), headers: { 'x-esopt-environment-key': KEY } });
      expect(res.status).toBe(400);
      expect(JSON.stringify(res.body)).toMatch(/keeps no secrets/);
    } finally {
      await api.dispose();
    }
  });
});

describe('the Episode function with a stored environment key', () => {
  let agent: Server;
  let origin = '';
  const seen: string[] = [];
  beforeAll(async () => {
    agent = createServer((req, res) => {
      seen.push(String(req.headers.authorization));
      req.resume();
      res.end(JSON.stringify({ reward: 1 }));
    });
    await new Promise<void>((r) => agent.listen(0, '127.0.0.1', r));
    origin = `http://127.0.0.1:${(agent.address() as AddressInfo).port}`;
  });
  afterAll(() => agent.close());

  async function play(url: string, keyParameter: string): Promise<RewardRecord> {
    const episodes = new FsObjectStore(join(root, `episodes-${Math.random().toString(16).slice(2)}`));
    const handle = createEpisodeHandler({ store: episodes, secrets, env: {}, memoryMb: 0, billedPerInvocation: false, prices: measuredPrices(), log: { info() {}, error() {} }, environmentContext: { outbound: EMBEDDED_OUTBOUND, allowCommands: false } });
    const request: EpisodeRequest = {
      run: 'keyed-env',
      iteration: 0,
      member: 0,
      task: { id: 't-1', value: { seed: 1 } },
      environment: { name: 'rollout', options: { url }, keyParameter },
      // no inference server: the key is read and checked before the rollout is, so the episode fails after
      policy: { baseUrl: 'http://127.0.0.1:9/v1', model: 'member-0-0' },
      generation: { temperature: 0, topP: 1, topK: 0, maxTokens: 4 },
      seed: 1,
      deadline: new Date(Date.now() + 10_000).toISOString(),
    };
    await handle(request);
    return (await readJson(episodes, keys.reward('keyed-env', 0, 0, 't-1'), RewardRecord))!;
  }

  it('reads the key and refuses to send it to any other origin', async () => {
    const ref = await storeEvaluationKey(secrets, PATH, 'env-test', KEY, origin);
    const elsewhere = await play('https://agent.example.com/rollout', ref.parameter);
    expect(elsewhere.error).toMatch(/refusing to send the key .* it is only for http:\/\/127\.0\.0\.1/);
    expect(seen).toEqual([]);
    const gone = await play(`${origin}/rollout`, `${PATH}/env-missing`);
    expect(gone.error).toMatch(/does not exist/);
  });
});
