/**
 * The inference server over real HTTP on 127.0.0.1 with the real tiny ONNX engine: OpenAI's wire format
 * (non-stream and SSE) field by field, model resolution (404/409), bad bodies (400 with zod paths), bearer
 * auth (401), back-pressure (429 + Retry-After), timeouts, cancellation, /v1/models, /healthz, /metrics,
 * and an unchanged OpenAI-compatible client (our HTTP policy) talking to it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ask } from '../../shared/es.ts';
import { HttpPolicy } from '../../environments/policies/http-client.ts';
import type { ChatMessage } from '../../shared/ports/policy.ts';
import type { Engine, GenerateRow } from '../../trainer/engine/engine.ts';
import { createEngine } from '../../trainer/engine/model/create-engine.ts';
import { ChatCompletion, ChatCompletionChunk, ErrorBody } from '../../trainer/serving/openai-schema.ts';
import { startInferenceServer, type RunningServer } from '../../trainer/serving/server.ts';

let engine: Engine;
const servers: RunningServer[] = [];

beforeAll(async () => {
  engine = await createEngine({ model: { preset: 'tiny', seed: 0 }, mode: 'full' });
});
afterAll(async () => {
  for (const s of servers) await s.close();
  await engine.close();
});

async function serve(options: Parameters<typeof startInferenceServer>[1] = {}): Promise<RunningServer> {
  const s = await startInferenceServer(engine, options);
  servers.push(s);
  return s;
}

const hello = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Say hi.' },
];

function post(s: RunningServer, body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<Response> {
  return fetch(`${s.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal,
  });
}

/** The `data:` payloads of an SSE body, in order. */
function sseData(text: string): string[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith('data:'))
    .map((l) => l.slice(5).trim());
}

describe('inference server', () => {
  let s: RunningServer;
  beforeAll(async () => {
    s = await serve();
    s.service.setPopulation({ runSeed: 5, iteration: 3, sigma: 0.05, rank: 1, members: ask({ population: 4, antithetic: true }) });
  });

  it('answers a chat completion in OpenAI’s format, field by field', async () => {
    const res = await post(s, { model: 'base', messages: hello, temperature: 0, max_tokens: 8 });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const body = ChatCompletion.parse(await res.json());
    expect(body.object).toBe('chat.completion');
    expect(body.model).toBe('base');
    expect(body.choices).toHaveLength(1);
    expect(body.choices[0].index).toBe(0);
    expect(body.choices[0].message.role).toBe('assistant');
    expect(['stop', 'length']).toContain(body.choices[0].finish_reason);
    expect(body.usage.prompt_tokens).toBe(engine.encodeChat(hello as never).length);
    expect(body.usage.completion_tokens).toBeGreaterThan(0);
    expect(body.usage.completion_tokens).toBeLessThanOrEqual(8);
    expect(body.usage.total_tokens).toBe(body.usage.prompt_tokens + body.usage.completion_tokens);
    if (body.choices[0].finish_reason === 'length') expect(body.usage.completion_tokens).toBe(8);
  });

  it('streams the same completion as SSE chunks with a usage chunk and [DONE]', async () => {
    const req = { model: 'member-3-1', messages: hello, temperature: 0, max_tokens: 8 };
    const plain = ChatCompletion.parse(await (await post(s, req)).json());
    const res = await post(s, { ...req, stream: true, stream_options: { include_usage: true } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const data = sseData(await res.text());
    expect(data.at(-1)).toBe('[DONE]');
    const chunks = data.slice(0, -1).map((d) => ChatCompletionChunk.parse(JSON.parse(d)));
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(chunks.every((c) => c.object === 'chat.completion.chunk' && c.model === 'member-3-1')).toBe(true);
    expect(chunks[0].choices[0].delta.role).toBe('assistant');
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    // the same prompt again: all of it but its last token comes from the prefix cache
    expect(last.usage).toEqual({ ...plain.usage, prompt_tokens_details: { cached_tokens: plain.usage.prompt_tokens - 1 } });
    const finish = chunks.at(-2)!;
    expect(finish.choices[0].finish_reason).toBe(plain.choices[0].finish_reason);
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
    const text = chunks.flatMap((c) => c.choices.map((ch) => ch.delta.content ?? '')).join('');
    expect(text).toBe(plain.choices[0].message.content);
  });

  it('streams without a usage field unless asked for', async () => {
    const data = sseData(await (await post(s, { model: 'base', messages: hello, temperature: 0, max_tokens: 4, stream: true })).text());
    const chunks = data.slice(0, -1).map((d) => ChatCompletionChunk.parse(JSON.parse(d)));
    expect(chunks.every((c) => !('usage' in c))).toBe(true);
    expect(chunks.at(-1)!.choices[0].finish_reason).not.toBeNull();
  });

  it('a member is served by its own weights, and the same seed replays', async () => {
    const req = (model: string) => ({ model, messages: hello, temperature: 1, seed: 42, max_tokens: 24 });
    const a = ChatCompletion.parse(await (await post(s, req('member-3-0'))).json()).choices[0].message.content;
    const again = ChatCompletion.parse(await (await post(s, req('member-3-0'))).json()).choices[0].message.content;
    const b = ChatCompletion.parse(await (await post(s, req('member-3-1'))).json()).choices[0].message.content;
    expect(again).toBe(a);
    // The antithetic twin of member 0 perturbs the other way: a different policy.
    expect(b).not.toBe(a);
  });

  it('409 for a member of a finished iteration, 503 for one not started yet, 404 for an unknown one', async () => {
    const old = await post(s, { model: 'member-2-0', messages: hello });
    expect(old.status).toBe(409);
    const body = ErrorBody.parse(await old.json());
    expect(body.error.message).toMatch(/iteration 2.*finished.*live iteration is 3/);
    const early = await post(s, { model: 'member-4-0', messages: hello });
    expect(early.status).toBe(503);
    expect(ErrorBody.parse(await early.json()).error.code).toBe('iteration_not_started');
    expect((await post(s, { model: 'member-3-99', messages: hello })).status).toBe(404);
    const unknown = await post(s, { model: 'gpt-4o', messages: hello });
    expect(unknown.status).toBe(404);
    expect(ErrorBody.parse(await unknown.json()).error.code).toBe('model_not_found');
  });

  it('400 names the failing fields', async () => {
    const res = await post(s, { model: 'base', messages: [{ role: 'wizard', content: 'x' }], temperature: 'hot' });
    expect(res.status).toBe(400);
    const msg = ErrorBody.parse(await res.json()).error.message;
    expect(msg).toContain('messages.0.role');
    expect(msg).toContain('temperature');
    const notJson = await post(s, '{"model": ');
    expect(notJson.status).toBe(400);
    expect(ErrorBody.parse(await notJson.json()).error.message).toMatch(/not valid JSON/);
    const tooLong = await post(s, { model: 'base', messages: hello, max_tokens: 10_000 });
    expect(tooLong.status).toBe(400);
    expect(ErrorBody.parse(await tooLong.json()).error.code).toBe('context_length_exceeded');
  });

  it('lists base and the live members; health and metrics', async () => {
    const models = (await (await fetch(`${s.url}/v1/models`)).json()) as { object: string; data: Array<{ id: string; object: string }> };
    expect(models.object).toBe('list');
    expect(models.data.map((m) => m.id)).toEqual(['base', 'member-3-0', 'member-3-1', 'member-3-2', 'member-3-3']);
    expect(models.data.every((m) => m.object === 'model')).toBe(true);
    const health = (await (await fetch(`${s.url}/healthz`)).json()) as { ok: boolean; liveIteration: number };
    expect(health).toMatchObject({ ok: true, liveIteration: 3 });
    const metrics = await (await fetch(`${s.url}/metrics`)).text();
    for (const name of ['esopt_requests_total', 'esopt_tokens_per_second', 'esopt_batch_size_bucket', 'esopt_queue_depth', 'esopt_member_switches_total', 'esopt_request_duration_seconds_count']) {
      expect(metrics).toMatch(new RegExp(`^${name}`, 'm'));
    }
    expect(metrics).toMatch(/^esopt_requests_total\{status="200"\} [1-9]/m);
    expect(metrics).toMatch(/^esopt_requests_total\{status="409"\} [1-9]/m);
    expect(Number(/^esopt_completion_tokens_total (\d+)/m.exec(metrics)![1])).toBeGreaterThan(0);
  });

  it('an OpenAI-compatible client works unchanged (our HTTP policy)', async () => {
    const policy = new HttpPolicy({ baseUrl: `${s.url}/v1`, model: 'member-3-2', maxTokens: 6, retries: 0 });
    const reply = await policy.act([{ role: 'user', content: 'hi' }], { step: 0 });
    expect(reply.tokens.completion).toBeGreaterThan(0);
    expect(typeof reply.text).toBe('string');
  });

  it("an episode's turns report the prompt tokens the prefix cache served (usage.prompt_tokens_details.cached_tokens)", async () => {
    const chat: ChatMessage[] = [{ role: 'system', content: 'A fresh game.' }, { role: 'user', content: 'Turn one: your move?' }];
    const first = ChatCompletion.parse(await (await post(s, { model: 'member-3-0', messages: chat, temperature: 0, max_tokens: 5 })).json());
    const before = engine.encodeChat(chat).length;
    // at most the chat template's head, shared with this member's earlier requests
    expect(first.usage.prompt_tokens_details.cached_tokens).toBeLessThan(before / 2);
    chat.push({ role: 'assistant', content: first.choices[0].message.content ?? '' }, { role: 'user', content: 'Turn two: and now?' });
    const second = ChatCompletion.parse(await (await post(s, { model: 'member-3-0', messages: chat, temperature: 0, max_tokens: 5 })).json());
    expect(second.usage.prompt_tokens_details.cached_tokens).toBeGreaterThanOrEqual(before);
    expect(second.usage.prompt_tokens_details.cached_tokens).toBeLessThan(second.usage.prompt_tokens);
    // another member's weights never see those K/V; the OpenAI-compatible client passes the count on
    const other = await new HttpPolicy({ baseUrl: `${s.url}/v1`, model: 'member-3-1', maxTokens: 5, retries: 0 }).act(chat, { step: 1 });
    expect(other.tokens.cached).toBeLessThan(before / 2);
    const again = await new HttpPolicy({ baseUrl: `${s.url}/v1`, model: 'member-3-1', maxTokens: 5, retries: 0 }).act(chat, { step: 1 });
    expect(again.tokens.cached).toBe(again.tokens.prompt - 1);
    expect(s.service.metrics.render()).toMatch(/^esopt_cached_prompt_tokens_total [1-9]\d*$/m);
  });

  it('guided_regex / guided_choice constrain the reply; a bad pattern is a 400 naming the field', async () => {
    const regex = await post(s, { model: 'base', messages: hello, guided_regex: 'place (1 2|3 4) [1-4]', temperature: 1.2, seed: 5 });
    expect(regex.status).toBe(200);
    expect(ChatCompletion.parse(await regex.json()).choices[0].message.content).toMatch(/^place (1 2|3 4) [1-4]$/);
    const choice = await post(s, { model: 'member-3-1', messages: hello, guided_choice: ['yes', 'no'], seed: 6 });
    expect(['yes', 'no']).toContain(ChatCompletion.parse(await choice.json()).choices[0].message.content);
    const bad = await post(s, { model: 'base', messages: hello, guided_regex: '(unclosed' });
    expect(bad.status).toBe(400);
    const err = ErrorBody.parse(await bad.json()).error;
    expect(err.param).toBe('guided_regex');
    expect(err.message).toMatch(/does not compile/);
    const both = await post(s, { model: 'base', messages: hello, guided_regex: 'a', guided_choice: ['a'] });
    expect(both.status).toBe(400);
    expect(ErrorBody.parse(await both.json()).error.message).toMatch(/guided_choice.*not both/);
  });

  it('the HTTP policy forwards an action constraint only when guided decoding is on', async () => {
    const context = { step: 0, constraint: { choice: ['left', 'right'] } };
    const chat: ChatMessage[] = [{ role: 'user', content: 'Which way?' }];
    const on = new HttpPolicy({ baseUrl: `${s.url}/v1`, model: 'base', maxTokens: 12, retries: 0, guidedDecoding: true });
    const off = new HttpPolicy({ baseUrl: `${s.url}/v1`, model: 'base', maxTokens: 12, retries: 0 });
    for (let seed = 0; seed < 4; seed++) {
      const reply = await new HttpPolicy({ baseUrl: `${s.url}/v1`, model: 'base', maxTokens: 12, retries: 0, guidedDecoding: true, temperature: 1, seed }).act(chat, context);
      expect(['left', 'right']).toContain(reply.text);
    }
    expect(['left', 'right']).toContain((await on.act(chat, context)).text);
    // The untrained model left to itself says neither.
    expect(['left', 'right']).not.toContain((await off.act(chat, context)).text);
  });

  it('concurrent requests are decoded together in batches', async () => {
    const before = await (await fetch(`${s.url}/metrics`)).text();
    const batches = (t: string) => Number(/^esopt_batch_size_count (\d+)/m.exec(t)![1]);
    const all = await Promise.all(Array.from({ length: 8 }, (_, i) => post(s, { model: i % 2 ? 'base' : `member-3-${i % 4}`, messages: hello, max_tokens: 4, seed: i })));
    expect(all.every((r) => r.status === 200)).toBe(true);
    const after = await (await fetch(`${s.url}/metrics`)).text();
    expect(batches(after) - batches(before)).toBeLessThan(8);
  });
});

describe('bearer auth', () => {
  it('401 without the token or with a wrong one; /healthz stays open', async () => {
    const s = await serve({ token: 'sekrit-token' });
    const none = await post(s, { model: 'base', messages: hello, max_tokens: 2 });
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Bearer');
    expect(ErrorBody.parse(await none.json()).error.code).toBe('invalid_api_key');
    expect((await post(s, { model: 'base', messages: hello, max_tokens: 2 }, { authorization: 'Bearer sekrit-tokeN' })).status).toBe(401);
    expect((await fetch(`${s.url}/v1/models`)).status).toBe(401);
    expect((await fetch(`${s.url}/metrics`)).status).toBe(401);
    expect((await post(s, { model: 'base', messages: hello, max_tokens: 2 }, { authorization: 'Bearer sekrit-token' })).status).toBe(200);
    expect((await fetch(`${s.url}/healthz`)).status).toBe(200);
  });
});

describe('back-pressure, timeouts, cancellation', () => {
  it('429 with Retry-After when the queue is full', async () => {
    // A long window keeps requests queued, so the third one finds the queue (of 2) full.
    const s = await serve({ batching: { windowMs: 300, maxWaitMs: 300, maxBatch: 8, maxQueue: 2 } });
    const req = { model: 'base', messages: hello, max_tokens: 2 };
    const results = await Promise.all([post(s, req), post(s, req), post(s, req)]);
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 200, 429]);
    const limited = results.find((r) => r.status === 429)!;
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(ErrorBody.parse(await limited.json()).error.type).toBe('rate_limit_error');
  });

  it('504 when a request outlives its timeout', async () => {
    const s = await serve({ requestTimeoutMs: 50, batching: { windowMs: 400, maxWaitMs: 400, maxBatch: 8, maxQueue: 8 } });
    const res = await post(s, { model: 'base', messages: hello, max_tokens: 2 });
    expect(res.status).toBe(504);
    expect(ErrorBody.parse(await res.json()).error.code).toBe('timeout');
  });

  it('a request whose client went away is dropped from the queue', async () => {
    const s = await serve({ batching: { windowMs: 400, maxWaitMs: 400, maxBatch: 8, maxQueue: 8 } });
    const controller = new AbortController();
    const pending = post(s, { model: 'base', messages: hello, max_tokens: 2 }, {}, controller.signal).catch((e: Error) => e);
    await new Promise((r) => setTimeout(r, 100));
    expect(s.service.batcher.depth).toBe(1);
    controller.abort();
    expect(await pending).toBeInstanceOf(Error);
    await new Promise((r) => setTimeout(r, 100));
    expect(s.service.batcher.depth).toBe(0);
    const metrics = await (await fetch(`${s.url}/metrics`)).text();
    expect(metrics).toMatch(/^esopt_requests_total\{status="499"\} 1/m);
  });
});

/** The `data:` payload of each SSE event as it arrives off the wire. */
async function* sseEvents(res: Response): AsyncGenerator<string> {
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffered += value;
    for (let end = buffered.indexOf('\n\n'); end >= 0; end = buffered.indexOf('\n\n')) {
      const event = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      yield event
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trim())
        .join('\n');
    }
  }
}

const contentOf = (chunks: ChatCompletionChunk[]): string[] => chunks.flatMap((c) => c.choices.map((ch) => ch.delta.content ?? '')).filter((t) => t.length > 0);

/**
 * The real engine, observed: its generate results are handed on only once `release` settles, and the
 * moment decoding ended and the moment results went on are logged in `events`. Nothing is faked.
 */
function holdingResults(inner: Engine, release: Promise<unknown>, events: string[]): Engine {
  return new Proxy(inner, {
    get(target, prop) {
      if (prop === 'generate') {
        return async (rows: GenerateRow[]) => {
          const results = await target.generate(rows);
          events.push('engine decoded');
          await release;
          events.push('engine returned');
          return results;
        };
      }
      const value = Reflect.get(target, prop, target) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

describe('incremental streaming', () => {
  let s: RunningServer;
  beforeAll(async () => {
    s = await serve();
  });
  const sampledReq = { model: 'base', messages: hello, temperature: 1, seed: 42, max_tokens: 24 };

  it('a streamed reply arrives in several content chunks that join to the non-streamed reply of the same seed', async () => {
    const plain = ChatCompletion.parse(await (await post(s, sampledReq)).json());
    const data = sseData(await (await post(s, { ...sampledReq, stream: true })).text());
    expect(data.at(-1)).toBe('[DONE]');
    const chunks = data.slice(0, -1).map((d) => ChatCompletionChunk.parse(JSON.parse(d)));
    expect(chunks[0].choices[0].delta).toEqual({ role: 'assistant', content: '' });
    expect(chunks.at(-1)!.choices[0].finish_reason).toBe(plain.choices[0].finish_reason);
    const pieces = contentOf(chunks.slice(1, -1));
    expect(pieces.length).toBeGreaterThan(1);
    expect(pieces.join('')).toBe(plain.choices[0].message.content);
    expect(chunks.slice(1, -1).every((c) => c.choices[0].finish_reason === null && c.choices[0].delta.role === undefined)).toBe(true);
  });

  it('stop strings never reach the stream', async () => {
    const plain = ChatCompletion.parse(await (await post(s, sampledReq)).json()).choices[0].message.content!;
    const stop = plain.slice(5, 7);
    const cut = plain.slice(0, plain.indexOf(stop));
    const stopped = ChatCompletion.parse(await (await post(s, { ...sampledReq, stop: [stop] })).json());
    expect(stopped.choices[0].message.content).toBe(cut);
    const data = sseData(await (await post(s, { ...sampledReq, stop: [stop], stream: true })).text());
    const chunks = data.slice(0, -1).map((d) => ChatCompletionChunk.parse(JSON.parse(d)));
    expect(contentOf(chunks).join('')).toBe(cut);
    expect(chunks.at(-1)!.choices[0].finish_reason).toBe('stop');
  });

  it('the first content chunk reaches the client before the engine call returns', async () => {
    const events: string[] = [];
    let sawFirst!: () => void;
    // Results are held until the client has a piece; without incremental streaming it never would, so a
    // fallback lets the call finish and the ordering check below fails instead of the test hanging.
    const firstPiece = new Promise<void>((resolve) => (sawFirst = resolve));
    const gated = await startInferenceServer(holdingResults(engine, Promise.race([firstPiece, new Promise((r) => setTimeout(r, 3000))]), events));
    servers.push(gated);
    const res = await post(gated, { ...sampledReq, stream: true, stream_options: { include_usage: true } });
    const pieces: string[] = [];
    const data: string[] = [];
    for await (const d of sseEvents(res)) {
      data.push(d);
      if (d === '[DONE]') continue;
      const content = ChatCompletionChunk.parse(JSON.parse(d)).choices[0]?.delta.content;
      if (content) {
        if (pieces.length === 0) events.push('client got a piece');
        pieces.push(content);
        sawFirst();
      }
    }
    expect(events.indexOf('client got a piece')).toBeGreaterThanOrEqual(0);
    expect(events.indexOf('client got a piece')).toBeLessThan(events.indexOf('engine returned'));
    expect(data.at(-1)).toBe('[DONE]');
    const plain = ChatCompletion.parse(await (await post(s, sampledReq)).json());
    expect(pieces.join('')).toBe(plain.choices[0].message.content);
    const { prompt_tokens_details: _, ...counts } = plain.usage;
    expect(ChatCompletionChunk.parse(JSON.parse(data.at(-2)!)).usage).toMatchObject(counts);
  });

  it('a client that leaves mid-stream ends its stream and is counted as 499', async () => {
    const controller = new AbortController();
    const left = new Promise<void>((resolve) => controller.signal.addEventListener('abort', () => resolve()));
    // As above: without incremental streaming the client would have no piece to leave after.
    const gated = await startInferenceServer(holdingResults(engine, Promise.race([left, new Promise((r) => setTimeout(r, 3000))]), []));
    servers.push(gated);
    const res = await post(gated, { ...sampledReq, stream: true }, {}, controller.signal);
    const read = (async () => {
      for await (const d of sseEvents(res)) {
        if (ChatCompletionChunk.parse(JSON.parse(d)).choices[0]?.delta.content) controller.abort();
      }
    })();
    await expect(read).rejects.toThrow();
    const count499 = async () => Number(/^esopt_requests_total\{status="499"\} (\d+)/m.exec(await (await fetch(`${gated.url}/metrics`)).text())?.[1] ?? 0);
    // The server counts the request once its stream notices the closed connection.
    for (let poll = 0; poll < 200 && (await count499()) === 0; poll++) await new Promise((r) => setTimeout(r, 20));
    expect(await count499()).toBe(1);
    expect(await (await fetch(`${gated.url}/metrics`)).text()).not.toMatch(/^esopt_requests_total\{status="200"\}/m);
  });
});
