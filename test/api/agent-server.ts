/**
 * An agent that is not ours, for the evaluation tests: an OpenAI-compatible chat endpoint on 127.0.0.1
 * with its own API key. It solves the sudoku tasks it is told to solve (their oracle's moves, step by
 * step) and answers an illegal move on the others, and reports token usage like a real provider.
 */
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { sudoku } from '../../environments/sudoku/definition.ts';
import { parseGrid, renderBoard } from '../../environments/sudoku/grid.ts';
import type { SudokuTask } from '../../environments/sudoku/task.ts';

export interface AgentCall {
  task: string;
  step: number;
  promptTokens: number;
  completionTokens: number;
}

export interface AgentServer {
  baseUrl: string;
  calls: AgentCall[];
  unauthorized: number;
  close(): Promise<void>;
}

export async function startAgentServer(apiKey: string, tasks: Array<{ id: string; task: SudokuTask }>, solves: (taskId: string) => boolean): Promise<AgentServer> {
  const boards = tasks.map((t) => ({ ...t, board: renderBoard(parseGrid(t.task.puzzle, t.task.size), t.task.size) }));
  const state: AgentServer = { baseUrl: '', calls: [], unauthorized: 0, close: async () => {} };
  const app = new Hono();
  app.post('/v1/chat/completions', async (c) => {
    if (c.req.header('authorization') !== `Bearer ${apiKey}`) {
      state.unauthorized++;
      return c.json({ error: { message: 'bad key' } }, 401);
    }
    const body = (await c.req.json()) as { messages: Array<{ role: string; content: string }> };
    const first = body.messages.find((m) => m.role === 'user')?.content ?? '';
    const known = boards.find((b) => first.includes(b.board));
    const step = body.messages.filter((m) => m.role === 'assistant').length;
    let text = 'place 1 1 9';
    if (known && solves(known.id)) text = (await sudoku.oracle(known.task, sudoku.optionsSchema.parse({ size: known.task.size })).act([], { step })).text;
    const promptTokens = Math.ceil(body.messages.reduce((a, m) => a + m.content.length, 0) / 4);
    const completionTokens = Math.ceil(text.length / 4);
    state.calls.push({ task: known?.id ?? '?', step, promptTokens, completionTokens });
    return c.json({
      id: `cmpl-${state.calls.length}`,
      object: 'chat.completion',
      choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
      usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens },
    });
  });
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
  });
  state.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  state.close = () => new Promise((resolve) => server.close(() => resolve()));
  return state;
}
