/**
 * A function run as Lambda runs it (trainer/dev/rehearsal/execution-environment.ts, lambda-function.ts,
 * function-url.ts): a small handler under aws-lambda-ric behind the Runtime API and a function URL, with its
 * memory as a cgroup limit, a /tmp volume of its ephemeral storage, its code read-only at /var/task, its
 * NODE_OPTIONS and its timeout. Each limit is pushed past and must fail as Lambda fails.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFunctionUrl, type FunctionUrl } from '../../trainer/dev/rehearsal/function-url.ts';
import { startLambdaFunction, type LambdaFunction } from '../../trainer/dev/rehearsal/lambda-function.ts';
import { runtimeClientDir } from '../../trainer/dev/rehearsal/runtime-client.ts';

const HANDLER = `
import { writeFileSync, openSync, writeSync, closeSync } from 'node:fs';
import { getHeapStatistics } from 'node:v8';
const held = [];
export const handler = async (event) => {
  const q = event.queryStringParameters ?? {};
  if (event.rawPath === '/throw') throw new TypeError('boom');
  const reply = (value) => ({ statusCode: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify(value) });
  try {
    switch (event.rawPath) {
      case '/echo':
        return { ...reply({ event, cwd: process.cwd(), taskRoot: process.env.LAMBDA_TASK_ROOT, memory: process.env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE, heapLimitMb: getHeapStatistics().heap_size_limit / 1048576, home: process.env.HOME ?? null }), cookies: ['a=1; Path=/', 'b=2'] };
      case '/binary':
        return { statusCode: 200, headers: { 'content-type': 'application/octet-stream' }, body: Buffer.from([0, 1, 2, 255]).toString('base64'), isBase64Encoded: true };
      case '/plain':
        return { hello: 'world' };
      case '/alloc': {
        const b = Buffer.alloc(Number(q.mb) * 1048576, 1);
        held.push(b);
        return reply({ held: held.length });
      }
      case '/free':
        held.length = 0;
        return reply({ held: 0 });
      case '/fill-tmp': {
        const fd = openSync('/tmp/fill', 'w');
        const chunk = Buffer.alloc(1048576, 7);
        try { for (let i = 0; i < Number(q.mb); i++) writeSync(fd, chunk); } finally { closeSync(fd); }
        return reply({ wrote: Number(q.mb) });
      }
      case '/write-code':
        writeFileSync('/var/task/new-file', 'x');
        return reply({ wrote: true });
      case '/sleep':
        await new Promise((r) => setTimeout(r, Number(q.s) * 1000));
        return reply({ slept: Number(q.s) });
    }
    return { statusCode: 404, body: 'no route' };
  } catch (err) {
    return reply({ error: err.code ?? err.message });
  }
};
`;

let code: string;
let work: string;
let fn: LambdaFunction;
let url: FunctionUrl;

// The runtime client is installed on first use (trainer/dev/rehearsal/runtime-client.ts; .ci/run warms its
// cache): a cold cache's build (about 1.5 min) is not the function's start.
beforeAll(() => runtimeClientDir(), 300_000);
beforeAll(async () => {
  code = mkdtempSync(join(tmpdir(), 'esopt-ric-code-'));
  work = mkdtempSync(join(tmpdir(), 'esopt-ric-work-'));
  writeFileSync(join(code, 'bundle.mjs'), HANDLER);
  fn = await startLambdaFunction({
    name: 'ric-test',
    codeDir: code,
    handler: 'bundle.handler',
    memoryMb: 192,
    ephemeralStorageMb: 64,
    timeoutS: 3,
    environment: { NODE_OPTIONS: '--max-old-space-size=123', ESOPT_SAMPLE: 'yes' },
    maxEnvironments: 1,
    workDir: work,
  });
  url = await startFunctionUrl(fn);
}, 60_000);
afterAll(async () => {
  await url?.close();
  await fn?.close();
  rmSync(code, { recursive: true, force: true });
  rmSync(work, { recursive: true, force: true });
});

const get = (path: string, init?: RequestInit) => fetch(`${url.url}${path}`, init);

describe('a function under aws-lambda-ric behind a function URL', () => {
  it('hands payload 2.0 events in (query, cookies, lower-cased headers, base64 binary bodies) and maps results out', async () => {
    const res = await get('/echo?a=1&a=2&b=x', { headers: { Cookie: 'c1=v1; c2=v2', 'X-Custom': 'Yes' } });
    expect(res.status).toBe(200);
    expect(res.headers.getSetCookie()).toEqual(['a=1; Path=/', 'b=2']);
    const body = (await res.json()) as { event: Record<string, unknown>; cwd: string; taskRoot: string; memory: string; heapLimitMb: number };
    expect(body.event).toMatchObject({ version: '2.0', rawPath: '/echo', rawQueryString: 'a=1&a=2&b=x', cookies: ['c1=v1', 'c2=v2'], queryStringParameters: { a: '1,2', b: 'x' }, isBase64Encoded: false });
    expect((body.event.headers as Record<string, string>)['x-custom']).toBe('Yes');
    expect((body.event.requestContext as { http: { method: string } }).http.method).toBe('GET');
    // Lambda's layout and variables, and the function's NODE_OPTIONS applied.
    expect(body).toMatchObject({ cwd: '/var/task', taskRoot: '/var/task', memory: '192' });
    expect(body.heapLimitMb).toBeGreaterThanOrEqual(123);
    expect(body.heapLimitMb).toBeLessThan(200);
    const posted = await get('/echo', { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: new Uint8Array([9, 8, 7]) });
    const event = ((await posted.json()) as { event: { body: string; isBase64Encoded: boolean } }).event;
    expect(event.isBase64Encoded).toBe(true);
    expect([...Buffer.from(event.body, 'base64')]).toEqual([9, 8, 7]);
    expect([...new Uint8Array(await (await get('/binary')).arrayBuffer())]).toEqual([0, 1, 2, 255]);
    const plain = await get('/plain');
    expect({ status: plain.status, type: plain.headers.get('content-type'), body: await plain.json() }).toEqual({ status: 200, type: 'application/json', body: { hello: 'world' } });
  });

  it('reports a thrown error as a function error (502 through the URL), the environment kept warm', async () => {
    const started = fn.started;
    const outcome = await fn.invoke({ rawPath: '/throw' });
    expect(outcome).toMatchObject({ ok: false, errorType: 'TypeError', errorMessage: 'boom' });
    expect((await get('/throw')).status).toBe(502);
    expect((await fn.invoke({ rawPath: '/plain' })).ok).toBe(true);
    expect(fn.started).toBe(started);
  });

  it('keeps the code read-only and /tmp at its configured size', async () => {
    expect(JSON.parse((await fn.invoke({ rawPath: '/write-code' })).payload!)).toMatchObject({ body: JSON.stringify({ error: 'EROFS' }) });
    const full = await fn.invoke({ rawPath: '/fill-tmp', queryStringParameters: { mb: '80' } });
    expect(JSON.parse(full.payload!)).toMatchObject({ body: JSON.stringify({ error: 'ENOSPC' }) });
    expect(full.tmpUsedMb).toBeGreaterThan(55);
    expect(full.tmpUsedMb).toBeLessThanOrEqual(64);
  });

  it('measures peak memory per invocation, and past the memory limit the runtime is killed and a fresh environment serves the next', async () => {
    const small = await fn.invoke({ rawPath: '/alloc', queryStringParameters: { mb: '40' } });
    expect(small.ok).toBe(true);
    expect(small.peakMemoryMb).toBeGreaterThanOrEqual(40);
    expect(small.peakMemoryMb).toBeLessThanOrEqual(192);
    const started = fn.started;
    const killed = await fn.invoke({ rawPath: '/alloc', queryStringParameters: { mb: '400' } });
    expect(killed).toMatchObject({ ok: false, errorType: 'Runtime.OutOfMemory', errorMessage: 'Runtime exited with error: signal: killed' });
    const next = await fn.invoke({ rawPath: '/plain' });
    expect(next).toMatchObject({ ok: true, coldStart: true });
    expect(fn.started).toBe(started + 1);
  }, 30_000);

  it('ends an invocation past its timeout as Lambda does, and replaces the environment', async () => {
    const started = fn.started;
    const slow = await fn.invoke({ rawPath: '/sleep', queryStringParameters: { s: '10' } });
    expect(slow).toMatchObject({ ok: false, errorType: 'Sandbox.Timedout', errorMessage: 'Task timed out after 3.00 seconds' });
    expect(slow.durationMs).toBeLessThan(6000);
    expect((await fn.invoke({ rawPath: '/plain' })).ok).toBe(true);
    expect(fn.started).toBe(started + 1);
  }, 30_000);
});
