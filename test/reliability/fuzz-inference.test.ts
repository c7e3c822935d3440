/**
 * 1,000 fast-check bodies for the inference server's /v1/chat/completions, over real HTTP on 127.0.0.1
 * with the real tiny ONNX engine and a live population: random JSON, broken JSON text and near-valid
 * requests (plain, streamed, guided by a regex or a choice list, for base and for members), mutated.
 * Every answer is 2xx or 4xx in OpenAI's error envelope, every 400 of a bad body names the zod path,
 * no stream ends in a server error, and the server's own metrics count no 5xx.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ask } from '../../shared/es.ts';
import type { Engine } from '../../trainer/engine/engine.ts';
import { createEngine } from '../../trainer/engine/model/create-engine.ts';
import { ErrorBody } from '../../trainer/serving/openai-schema.ts';
import { startInferenceServer, type RunningServer } from '../../trainer/serving/server.ts';
import { bodyText, fuzzBody, type Json } from './helpers/fuzz-bodies.ts';

const RUNS = 1000;
const TOKEN = 'inference-fuzz-token-42';

let engine: Engine;
let server: RunningServer;

beforeAll(async () => {
  engine = await createEngine({ model: { preset: 'tiny', seed: 0 }, mode: 'lowrank' });
  // A small completion budget keeps the valid bodies cheap; the fuzzer still sends its own max_tokens.
  server = await startInferenceServer(engine, { token: TOKEN, defaultMaxTokens: 4, requestTimeoutMs: 60_000 });
  server.service.setPopulation({ runSeed: 1, iteration: 2, sigma: 0.05, rank: 1, members: ask({ population: 4, antithetic: true }) });
});
afterAll(async () => {
  await server?.close();
  await engine?.close();
});

const user = { role: 'user', content: 'Fill the blank: 1 2 _ 4' };
const VALID: Json[] = [
  { model: 'base', messages: [{ role: 'system', content: 'Be terse.' }, user], temperature: 0, max_tokens: 3 },
  { model: 'member-2-1', messages: [user], temperature: 0.7, top_p: 0.9, top_k: 5, max_tokens: 3, seed: 7, stop: ['\n'], stream: true, stream_options: { include_usage: true } },
  { model: 'member-2-3', messages: [user, { role: 'assistant', content: [{ type: 'text', text: 'ok' }] }, user], max_completion_tokens: 3, guided_regex: '[1-4]{1,2}' },
  { model: 'base', messages: [user], max_tokens: 2, guided_choice: ['1', '2', '3'], n: 1 },
];

describe('inference server fuzz', () => {
  it(`answers ${RUNS} fuzzed chat-completion bodies with 2xx or 4xx in OpenAI's error format`, async () => {
    const seen = new Map<number, number>();
    const body = fc.oneof(...VALID.map((v) => fuzzBody(v)));
    await fc.assert(
      fc.asyncProperty(body, async (b) => {
        const res = await fetch(`${server.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
          body: bodyText(b),
        });
        const text = await res.text();
        seen.set(res.status, (seen.get(res.status) ?? 0) + 1);
        const what = `${res.status} ${text.slice(0, 400)} for ${bodyText(b).slice(0, 400)}`;
        expect(res.status, what).toBeGreaterThanOrEqual(200);
        expect(res.status, what).toBeLessThan(500);
        if (res.status >= 400) {
          const error = ErrorBody.parse(JSON.parse(text)).error;
          if (error.code === 'invalid_request') {
            // "invalid request: <path>: <message>; …", and `param` names the first failing field.
            expect(error.message, what).toMatch(/^invalid request: \S+: /);
            expect(error.param === null || error.message.includes(`${error.param}: `), what).toBe(true);
          }
        } else if (res.headers.get('content-type')?.startsWith('text/event-stream')) {
          expect(text, what).not.toMatch(/server_error/);
          expect(text.trimEnd(), what).toMatch(/data: \[DONE\]$/);
        }
      }),
      { numRuns: RUNS },
    );
    const statuses = [...seen.keys()];
    expect(statuses.some((s) => s === 200)).toBe(true);
    expect(statuses).toContain(400);
    // What the server itself counted: no request ended in a 5xx, streamed ones included.
    expect(server.service.metrics.render()).not.toMatch(/esopt_requests_total\{status="5\d\d"\}/);
    console.log('inference fuzz statuses:', JSON.stringify(Object.fromEntries([...seen].sort((a, b) => a[0] - b[0]))));
  }, 120_000);

  it('refuses guided regexes that would blow up the automaton or cannot compile with a 400, and serves a nested-star one', async () => {
    const expected: Array<[string, number]> = [
      ['(a|b)*a(a|b){40}', 400],
      ['a{99999}', 400],
      ['(?=a)a', 400],
      // A backreference to a fixed group is a plain pattern ("aa"): served, and the reply matches it.
      ['(a)\\1', 200],
      ['[', 400],
      ['((((a*)*)*)*)*b', 200],
    ];
    for (const [guided_regex, status] of expected) {
      const res = await fetch(`${server.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
        body: JSON.stringify({ model: 'base', messages: [user], max_tokens: 2, guided_regex }),
      });
      const body = await res.text();
      expect(res.status, `${guided_regex}: ${body}`).toBe(status);
      if (status === 400) expect(ErrorBody.parse(JSON.parse(body)).error).toMatchObject({ code: 'invalid_constraint', param: 'guided_regex' });
    }
  }, 60_000);
});
