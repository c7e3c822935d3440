/**
 * A short embedded ES run of the tools environment against the example MCP server (streamable HTTP on
 * 127.0.0.1): the tiny preset model plays, tasks come from options.mcp.tasks, every episode is recorded
 * without a failure (whatever its reward: the tiny model is untrained).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serveBookshopHttp } from '../../examples/mcp/server.ts';
import { RewardRecord, RunConfig } from '../../shared/schemas/index.ts';
import { runEmbedded } from '../../trainer/assembly/run.ts';
import { silentProgress } from '../../trainer/training/loop/progress.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-mcp-run-'));
const BOOKS = ['Kindred', 'Solaris', 'Roadside Picnic', 'Parable of the Sower', 'A Wizard of Earthsea', 'The Left Hand of Darkness'];
const tasks = BOOKS.flatMap((title) => [
  { kind: 'mcp', question: `How many copies of ${title} are in stock?`, verifier: { kind: 'predicate', predicate: { type: 'number' } } },
  { kind: 'mcp', question: `What does ${title} cost, in US cents?`, verifier: { kind: 'tool', tool: 'grade', arguments: { expected: 0 } } },
  { kind: 'mcp', question: `Who wrote ${title}?`, verifier: { kind: 'answer', answer: 'someone' } },
]);

describe('an embedded run with MCP tools', () => {
  let server: Server;
  let url = '';
  let requests = 0;
  beforeAll(async () => {
    server = await serveBookshopHttp(0);
    server.on('request', () => requests++);
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  });
  afterAll(async () => {
    await new Promise<void>((r) => server.close(() => r()));
    rmSync(root, { recursive: true, force: true });
  });

  it('trains for an iteration and records every episode', async () => {
    const config = RunConfig.parse({
      environment: { name: 'tools', options: { horizon: 2, mcp: { servers: [{ name: 'shop', url }], tasks, instructions: 'You work at a bookshop.' } } },
      tasks: { seed: 1, trainPerIteration: 2, evalCount: 2 },
      model: { preset: 'tiny' },
      localEpisodes: 'in-process',
      es: { population: 2, sigma: 0.05, alpha: 0.05 },
      generation: { temperature: 1, topP: 1, topK: 0, maxTokens: 8 },
      iterations: 1,
      evalInterval: 1,
      checkpointInterval: 1,
      workers: 2,
      seed: 3,
    });
    const { report } = await runEmbedded({ config, run: 'mcp', storeRoot: root, progress: silentProgress });
    const rewards = join(root, 'runs', 'mcp', 'iterations');
    const files = readdirSync(rewards).flatMap((k) => (readdirSync(join(rewards, k, 'rewards'), { recursive: true }) as string[]).filter((f) => f.endsWith('.json')).map((f) => join(rewards, k, 'rewards', f)));
    expect(files.length).toBeGreaterThanOrEqual(4);
    const records = files.map((f) => RewardRecord.parse(JSON.parse(readFileSync(f, 'utf8'))));
    // Played against the server (steps taken, no failed episode), rewards recorded.
    expect(records.every((r) => r.error === null && r.steps > 0 && Number.isFinite(r.reward))).toBe(true);
    // Each episode connected and listed the server's tools (initialize, initialized, tools/list at least).
    expect(requests).toBeGreaterThanOrEqual(3 * records.length);
    expect(report.evaluations.length).toBeGreaterThan(0);
  }, 180_000);
});
