/**
 * A run under pushed instructions (c_t), played by the local worker pool against an OpenAI-compatible
 * endpoint of the test's own that records every chat request: each episode's system message is the pushed
 * system text around the environment's prompt, with the skill after it; the manifest, the log and the
 * stored transcripts name the pinned manifest. A run without instructions sends the environment's own prompt.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sudoku } from '../../environments/sudoku/definition.ts';
import { StoredTranscript } from '../../functions/episode-transcript.ts';
import { publishInstructions } from '../../shared/instructions-catalog.ts';
import { keys } from '../../shared/keys.ts';
import { IterationManifest, LogEntry, RunConfig, type RunConfigInput } from '../../shared/schemas/index.ts';
import { readJson } from '../../shared/store/json.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { localSite } from '../../trainer/assembly/local-site.ts';
import { runEmbedded } from '../../trainer/assembly/run.ts';
import { buildRunArtifact } from '../../trainer/training/export/run-artifact.ts';
import { silentProgress } from '../../trainer/training/loop/progress.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-instructions-run-'));
const OPTIONS = { size: 4, blanks: 2 };
/** Every chat request the endpoint got: its model and its system message. */
const seen: Array<{ model: string; system: string }> = [];
let endpoint: Server;
let baseUrl = '';

beforeAll(async () => {
  endpoint = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      const r = JSON.parse(body) as { model: string; messages: Array<{ role: string; content: string }> };
      seen.push({ model: r.model, system: r.messages.find((m) => m.role === 'system')?.content ?? '' });
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ id: 'x', object: 'chat.completion', model: r.model, choices: [{ index: 0, message: { role: 'assistant', content: 'place 1 1 1' }, finish_reason: 'stop' }], usage: { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 } }));
    });
  });
  await new Promise<void>((resolve) => endpoint.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}/v1`;
});
afterAll(async () => {
  await new Promise((resolve) => endpoint.close(resolve));
  rmSync(root, { recursive: true, force: true });
});

function config(extra: Partial<RunConfigInput>): RunConfig {
  return RunConfig.parse({
    environment: { name: 'sudoku', options: OPTIONS },
    tasks: { seed: 2, trainPerIteration: 1, evalCount: 1 },
    model: { preset: 'tiny' },
    localEpisodes: 'worker-processes',
    es: { population: 2, sigma: 0.05, alpha: 0.05 },
    generation: { temperature: 0, topP: 1, topK: 0, maxTokens: 8 },
    iterations: 1,
    evalInterval: 1,
    workers: 2,
    ...extra,
  });
}

async function train(run: string, c: RunConfig): Promise<Array<{ model: string; system: string }>> {
  const from = seen.length;
  const site = { ...localSite(root, c), policyEndpoint: { baseUrl } };
  const { result } = await runEmbedded({ config: c, run, site, progress: silentProgress });
  expect(result.rows[0]!.failed, JSON.stringify(result.rows[0])).toBe(0);
  return seen.slice(from);
}

/** The environment's own prompt for a task of this run: what a run without instructions must send. */
async function environmentPrompt(c: RunConfig): Promise<string> {
  const options = sudoku.optionsSchema.parse(c.environment.options);
  const [t] = sudoku.sampleTasks('train', 1, 0, options);
  return (await sudoku.create(t.task, options)).systemPrompt;
}

describe('instructions (c_t) in a run', () => {
  it('every episode, training and evaluation, runs under the pushed instructions; the records name their manifest', async () => {
    const store = new FsObjectStore(root);
    const documents = { system: 'You are a careful solver.\n\n{{environment}}\n\nCheck each row twice.', skills: [{ name: 'rows', text: 'Fill the row with the fewest blanks first.' }] };
    const pushed = (await publishInstructions(store, 'coach', documents)).record;
    const c = config({ instructions: 'coach' });
    const calls = await train('coached', c);
    // Members' episodes and the base model's evaluations alike.
    expect(calls.some((x) => x.model.startsWith('member-'))).toBe(true);
    expect(calls.some((x) => x.model === 'base')).toBe(true);
    const prompt = await environmentPrompt(c);
    const expected = `You are a careful solver.\n\n${prompt}\n\nCheck each row twice.\n\n## Skill: rows\n\nFill the row with the fewest blanks first.`;
    for (const x of calls) expect(x.system).toBe(expected);

    const pin = { name: 'coach', manifest: pushed.manifestSha256 };
    expect((await readJson(store, keys.config('coached'), RunConfig))?.instructions).toEqual(pin);
    expect((await readJson(store, keys.manifest('coached', 0), IterationManifest))?.instructions).toEqual(pin);
    const log = new TextDecoder().decode((await store.get(keys.log('coached')))!).trim().split('\n').map((l) => LogEntry.parse(JSON.parse(l)));
    expect(log.map((e) => e.instructions)).toEqual([pin]);
    expect((await buildRunArtifact(store, 'coached')).artifact.instructions).toEqual(pin);
    const transcripts = (await store.list(keys.run('coached'))).filter((k) => k.includes('/transcripts/'));
    expect(transcripts.length).toBeGreaterThan(0);
    for (const key of transcripts) {
      const stored = StoredTranscript.parse(JSON.parse(new TextDecoder().decode((await store.get(key))!)));
      const system = stored.entries[0];
      expect(system).toEqual({ kind: 'system', text: expected, instructions: pin });
    }
  }, 180_000);

  it('a run without instructions sends the environment its own prompt, as before', async () => {
    const c = config({});
    const calls = await train('plain', c);
    expect(calls.length).toBeGreaterThan(0);
    const prompt = await environmentPrompt(c);
    for (const x of calls) expect(x.system).toBe(prompt);
    const store = new FsObjectStore(root);
    expect((await readJson(store, keys.manifest('plain', 0), IterationManifest))?.instructions).toBeUndefined();
  }, 180_000);

  it('refuses instructions for a rollout agent, which writes its own prompts', () => {
    const r = RunConfig.safeParse({ ...config({}), environment: { name: 'rollout', options: { url: 'http://127.0.0.1:9/rollout' } }, instructions: 'coach' });
    expect(r.error?.issues.map((i) => i.path.join('.'))).toEqual(['instructions']);
  });

  it('refuses to start under instructions that were never pushed', async () => {
    await expect(runEmbedded({ config: config({ instructions: 'nobody' }), run: 'unknown-instructions', storeRoot: root, progress: silentProgress })).rejects.toThrow(/no instructions named "nobody".*esopt instructions push/);
  }, 60_000);
});
