/**
 * An SSM-compatible endpoint on loopback (the AWS JSON 1.1 protocol `@aws-sdk/client-ssm` speaks:
 * `POST /` with `X-Amz-Target: AmazonSSM.<Action>`) holding parameters in memory, for `esopt dev cloud`
 * and the tests, as s3rver stands in for S3. It serves PutParameter, GetParameter and DeleteParameter as
 * the secret store uses them, honours an Expiration policy (a parameter past its timestamp is gone), and
 * answers what AWS answers for the rest: ParameterNotFound, ParameterAlreadyExists, ValidationException.
 * `requests` lists every call with its input (a value only as its length), for tests to check shapes.
 */
import { serve, type ServerType } from '@hono/node-server';
import { Hono, type Context } from 'hono';
import type { AddressInfo } from 'node:net';

export interface SsmRequest {
  action: string;
  input: Record<string, unknown>;
}

export interface SsmEndpoint {
  url: string;
  requests: SsmRequest[];
  /** Names of the parameters that exist now. */
  names(): string[];
  close(): Promise<void>;
}

interface Parameter {
  type: string;
  value: string;
  version: number;
  expiresAt: number | null;
}

function awsError(c: Context, type: string, message: string) {
  c.header('x-amzn-ErrorType', type);
  return c.body(JSON.stringify({ __type: type, message }), 400, { 'content-type': 'application/x-amz-json-1.1' });
}

/** The Expiration policy's timestamp, or null without one; an unreadable policy list is a ValidationException. */
function expiry(policies: unknown): number | null {
  if (policies === undefined) return null;
  const list = JSON.parse(String(policies)) as { Type?: string; Attributes?: { Timestamp?: string } }[];
  const expiration = list.find((p) => p.Type === 'Expiration');
  if (!expiration) return null;
  const at = Date.parse(expiration.Attributes?.Timestamp ?? '');
  if (!Number.isFinite(at)) throw new Error('the Expiration policy has no valid Timestamp');
  return at;
}

/** `clock` is the endpoint's idea of now, so a test can move a parameter past its expiry. */
export async function startSsmEndpoint(clock: () => number = Date.now): Promise<SsmEndpoint> {
  const parameters = new Map<string, Parameter>();
  const requests: SsmRequest[] = [];
  const sweep = () => {
    for (const [name, p] of parameters) if (p.expiresAt !== null && p.expiresAt <= clock()) parameters.delete(name);
  };
  const app = new Hono();
  app.post('/', async (c) => {
    const action = (c.req.header('x-amz-target') ?? '').replace(/^AmazonSSM\./, '');
    const input = (await c.req.json().catch(() => ({}))) as Record<string, unknown>;
    requests.push({ action, input: 'Value' in input ? { ...input, Value: `[${String(input.Value).length} characters]` } : input });
    sweep();
    const name = typeof input.Name === 'string' ? input.Name : '';
    if (!name) return awsError(c, 'ValidationException', 'Name is required');
    const reply = (body: unknown) => c.body(JSON.stringify(body), 200, { 'content-type': 'application/x-amz-json-1.1' });
    switch (action) {
      case 'PutParameter': {
        if (typeof input.Value !== 'string' || !input.Value) return awsError(c, 'ValidationException', 'Value is required');
        if (input.Policies !== undefined && input.Tier !== 'Advanced') return awsError(c, 'ValidationException', 'parameter policies need the Advanced tier');
        const existing = parameters.get(name);
        if (existing && input.Overwrite !== true) return awsError(c, 'ParameterAlreadyExists', 'The parameter already exists.');
        let expiresAt: number | null;
        try {
          expiresAt = expiry(input.Policies);
        } catch (err) {
          return awsError(c, 'InvalidPolicyAttributeException', (err as Error).message);
        }
        const version = (existing?.version ?? 0) + 1;
        parameters.set(name, { type: String(input.Type ?? 'String'), value: input.Value, version, expiresAt });
        return reply({ Version: version, Tier: input.Tier ?? 'Standard' });
      }
      case 'GetParameter': {
        const p = parameters.get(name);
        if (!p) return awsError(c, 'ParameterNotFound', `Parameter ${name} not found.`);
        // Without WithDecryption AWS returns a SecureString's ciphertext; this endpoint has none to give.
        const value = p.type === 'SecureString' && input.WithDecryption !== true ? '[encrypted]' : p.value;
        return reply({ Parameter: { Name: name, Type: p.type, Value: value, Version: p.version } });
      }
      case 'DeleteParameter':
        if (!parameters.delete(name)) return awsError(c, 'ParameterNotFound', `Parameter ${name} not found.`);
        return reply({});
      default:
        return awsError(c, 'UnknownOperationException', `${action} is not served by the dev SSM endpoint`);
    }
  });
  const server: ServerType = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    names() {
      sweep();
      return [...parameters.keys()].sort();
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
