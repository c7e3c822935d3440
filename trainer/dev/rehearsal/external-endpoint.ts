/**
 * An agent that is not the stack's own, for pay-per-episode evaluations: an OpenAI-compatible chat
 * endpoint on loopback that answers every turn with one fixed reply and reports usage as a provider does.
 * It stands in for a user's model: the rehearsal checks the path to it (the Episode function reaching it,
 * with the key when one is set), not how well it plays. Every call is counted, refused ones apart.
 */
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { bearerToken, tokenMatches } from '../../../shared/bearer-token.ts';

export interface ExternalEndpoint {
  baseUrl: string;
  model: string;
  apiKey?: string;
  /** Chat calls answered, and those refused for a missing or wrong key. */
  readonly calls: { answered: number; unauthorized: number };
  close(): Promise<void>;
}

const MODEL = 'rehearsal-agent';
const REPLY = 'I pass.';

export async function startExternalEndpoint(options: { apiKey?: string } = {}): Promise<ExternalEndpoint> {
  const calls = { answered: 0, unauthorized: 0 };
  const app = new Hono();
  app.post('/v1/chat/completions', async (c) => {
    const given = bearerToken(c.req.header('authorization'));
    if (options.apiKey !== undefined && (given === null || !tokenMatches(given, options.apiKey))) {
      calls.unauthorized++;
      return c.json({ error: { message: 'invalid api key', type: 'invalid_request_error', code: 'invalid_api_key' } }, 401);
    }
    const body = (await c.req.json()) as { messages?: Array<{ content?: unknown }> };
    calls.answered++;
    // A provider's rough count: four characters a token.
    const promptTokens = Math.ceil(JSON.stringify(body.messages ?? []).length / 4);
    return c.json({
      id: `chatcmpl-${calls.answered}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: MODEL,
      choices: [{ index: 0, message: { role: 'assistant', content: REPLY }, finish_reason: 'stop' }],
      usage: { prompt_tokens: promptTokens, completion_tokens: 3, total_tokens: promptTokens + 3 },
    });
  });
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
  });
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    model: MODEL,
    ...(options.apiKey !== undefined ? { apiKey: options.apiKey } : {}),
    calls,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
