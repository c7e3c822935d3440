/**
 * The SecretStore's SSM adapter with the real SDK client against the dev SSM endpoint on loopback: the
 * requests it sends (SecureString, Advanced tier with an Expiration policy, create-only, decrypted reads),
 * what it answers for missing and expired parameters; and the evaluation-key binding on top of it (the
 * origin check, its errors), the worker's read cache and the redaction of a key from an episode's result.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSsmEndpoint, type SsmEndpoint } from '../../trainer/dev/local-cloud/ssm-endpoint.ts';
import { DEV_CREDENTIALS } from '../../trainer/dev/local-cloud/local-cloud.ts';
import { cachedSecrets } from '../../functions/secret-cache.ts';
import { redactSecret, REDACTED } from '../../functions/secret-redaction.ts';
import { EVALUATION_KEY_LIFETIME_MS, evaluationKeyFrom, storeEvaluationKey } from '../../shared/secrets/evaluation-key.ts';
import { SsmSecretStore } from '../../shared/secrets/ssm.ts';
import { MemorySecretStore } from '../cloud/helpers/memory-secrets.ts';

let now = Date.now();
let ssm: SsmEndpoint;
let store: SsmSecretStore;

beforeAll(async () => {
  ssm = await startSsmEndpoint(() => now);
  store = new SsmSecretStore({ endpoint: ssm.url, credentials: DEV_CREDENTIALS });
});
afterAll(async () => {
  store?.destroy();
  await ssm?.close();
});

describe('SsmSecretStore', () => {
  it('writes a SecureString create-only, in the Advanced tier with an Expiration policy; reads it decrypted; deletes it', async () => {
    ssm.requests.length = 0;
    const expiresAt = new Date(now + 3600_000);
    expect(await store.create('/esopt/test/eval-keys/eval-1', 'secret-value', expiresAt)).toBe(true);
    expect(await store.create('/esopt/test/eval-keys/eval-1', 'other', expiresAt)).toBe(false);
    expect(await store.get('/esopt/test/eval-keys/eval-1')).toBe('secret-value');
    await store.delete('/esopt/test/eval-keys/eval-1');
    expect(await store.get('/esopt/test/eval-keys/eval-1')).toBeNull();
    await store.delete('/esopt/test/eval-keys/eval-1');
    const put = { Name: '/esopt/test/eval-keys/eval-1', Value: '[12 characters]', Type: 'SecureString', Overwrite: false, Tier: 'Advanced', Policies: JSON.stringify([{ Type: 'Expiration', Version: '1.0', Attributes: { Timestamp: expiresAt.toISOString() } }]) };
    expect(ssm.requests).toEqual([
      { action: 'PutParameter', input: put },
      { action: 'PutParameter', input: { ...put, Value: '[5 characters]' } },
      { action: 'GetParameter', input: { Name: '/esopt/test/eval-keys/eval-1', WithDecryption: true } },
      { action: 'DeleteParameter', input: { Name: '/esopt/test/eval-keys/eval-1' } },
      { action: 'GetParameter', input: { Name: '/esopt/test/eval-keys/eval-1', WithDecryption: true } },
      { action: 'DeleteParameter', input: { Name: '/esopt/test/eval-keys/eval-1' } },
    ]);
  });

  it('a parameter past its expiry is gone; a bad name is refused before any request', async () => {
    await store.create('/esopt/test/eval-keys/eval-2', 'v', new Date(now + 1000));
    expect(ssm.names()).toContain('/esopt/test/eval-keys/eval-2');
    now += 1001;
    expect(await store.get('/esopt/test/eval-keys/eval-2')).toBeNull();
    const before = ssm.requests.length;
    await expect(store.get('esopt/no-leading-slash')).rejects.toThrow(/segments/);
    await expect(store.create('/esopt/a b', 'v', new Date(now + 1000))).rejects.toThrow(/segments/);
    expect(ssm.requests.length).toBe(before);
  });
});

describe('evaluation keys', () => {
  it('are stored bound to the endpoint origin for the lifetime, and given out only for URLs on that origin', async () => {
    ssm.requests.length = 0;
    const ref = await storeEvaluationKey(store, '/esopt/test/eval-keys', 'eval-3', 'sk-bound', 'https://api.example.com:8443/v1', new Date(now));
    expect(ref).toEqual({ parameter: '/esopt/test/eval-keys/eval-3', origin: 'https://api.example.com:8443' });
    const put = ssm.requests.find((r) => r.action === 'PutParameter')!;
    expect(JSON.parse(put.input.Policies as string)[0].Attributes.Timestamp).toBe(new Date(now + EVALUATION_KEY_LIFETIME_MS).toISOString());
    const value = await store.get(ref.parameter);
    expect(JSON.parse(value!)).toEqual({ apiKey: 'sk-bound', origin: 'https://api.example.com:8443' });
    expect(evaluationKeyFrom(ref.parameter, value, ['https://api.example.com:8443/v1', 'https://api.example.com:8443/other'])).toBe('sk-bound');
    for (const elsewhere of ['https://api.example.com/v1', 'http://api.example.com:8443/v1', 'https://evil.example.com:8443/v1']) {
      expect(() => evaluationKeyFrom(ref.parameter, value, ['https://api.example.com:8443/v1', elsewhere])).toThrow(/^evaluation key: refusing to send the key in \/esopt\/test\/eval-keys\/eval-3 to /);
    }
    expect(() => evaluationKeyFrom(ref.parameter, null, [])).toThrow(/^evaluation key: \/esopt\/test\/eval-keys\/eval-3 does not exist/);
    const garbled = () => evaluationKeyFrom(ref.parameter, '{"apiKey":"sk-garbled"}', []);
    expect(garbled).toThrow(/does not hold an esopt evaluation key/);
    expect(garbled).not.toThrow(/sk-garbled/);
    await expect(storeEvaluationKey(store, '/esopt/test/eval-keys', 'eval-3', 'sk-2', 'https://api.example.com/v1')).rejects.toThrow(/exists already/);
  });

  it("a worker's reads are cached for a minute, misses are not", async () => {
    const inner = new MemorySecretStore();
    let reads = 0;
    const counting = { ...inner, create: inner.create.bind(inner), delete: inner.delete.bind(inner), get: (n: string) => (reads++, inner.get(n)) };
    let t = 0;
    const cached = cachedSecrets(counting, 60_000, () => t);
    expect(await cached.get('/a')).toBeNull();
    await inner.create('/a', 'v', new Date(Date.now() + 3600_000));
    expect(await cached.get('/a')).toBe('v');
    expect(await cached.get('/a')).toBe('v');
    expect(reads).toBe(2);
    t += 60_001;
    expect(await cached.get('/a')).toBe('v');
    expect(reads).toBe(3);
  });

  it("is taken out of an episode's result wherever it appears, plain or base64", () => {
    const key = 'sk-echoed+/key';
    const result = {
      reward: 0,
      steps: 1,
      transcript: [{ kind: 'observation' as const, step: 0, text: `you sent ${key} and ${Buffer.from(key).toString('base64')}`, done: false }],
      tokens: { prompt: 1, completion: 1 },
      inferenceMs: 1,
      durationMs: 2,
      stopReason: 'error' as const,
      error: `HTTP 401: bad key ${Buffer.from(key).toString('base64url')}`,
    };
    const clean = redactSecret(result, key);
    expect(JSON.stringify(clean)).not.toContain(key);
    expect(JSON.stringify(clean)).not.toContain(Buffer.from(key).toString('base64'));
    expect(clean.error).toBe(`HTTP 401: bad key ${REDACTED}`);
    expect(clean.transcript[0]).toMatchObject({ text: `you sent ${REDACTED} and ${REDACTED}` });
    expect(clean.reward).toBe(0);
  });
});
