/**
 * One rollout: the agent gets `{ task, seed, inference: { baseUrl, model, apiKey, certificate? } }` and answers
 * `{ reward, info? }`. Its endpoint is called once (a POST is not idempotent: never retried) through
 * environments/outbound/ (checked address, no redirects, capped answer, time limit); a local command gets the
 * same JSON on stdin and answers on stdout, killed with its process group at the time limit.
 *
 * The reward counts only if the agent used its key: after the answer, `usage()` (the inference server's count
 * for the key) must show at least one call, or the episode fails with that reason — an agent that ignores the
 * endpoint cannot put a reward into an update. Errors are fixed sentences: an agent's body never reaches one.
 */
import { spawn } from 'node:child_process';
import { z } from 'zod';
import type { EnvironmentContext } from '../environment.ts';
import type { EpisodeResult, TranscriptEntry } from '../episode-runner.ts';
import { parseWith } from '../index.ts';
import { OutboundError } from '../outbound/address-policy.ts';
import { outboundFetch } from '../outbound/outbound-fetch.ts';
import { RolloutOptions, RolloutTask } from './definition.ts';

/** What the agent is given to reach the member's model. */
export interface InferenceGrant {
  /** Up to the API version (OpenAI SDK's convention). */
  baseUrl: string;
  model: string;
  /** The rollout's own key: this model's chat completions only, until the episode's deadline. */
  apiKey: string;
  /** PEM of the trainer box's self-signed certificate, when the endpoint is https with one (pin it). */
  certificate?: string;
}

export interface RolloutUsage {
  calls: number;
  promptTokens: number;
  completionTokens: number;
}

export interface RolloutInput {
  task: unknown;
  options: unknown;
  seed: number;
  grant: InferenceGrant;
  /** What the inference server served the grant's key. */
  usage: () => Promise<RolloutUsage>;
  context: EnvironmentContext;
  /** Epoch milliseconds. */
  deadline: number;
  signal?: AbortSignal;
}

const RolloutAnswer = z.object({ reward: z.number().finite(), info: z.record(z.string(), z.unknown()).optional() }).strict();

class RolloutFailure extends Error {}

async function callEndpoint(url: string, body: string, o: RolloutOptions, context: EnvironmentContext, timeoutMs: number, signal: AbortSignal | undefined): Promise<string> {
  const fetcher = outboundFetch(context.outbound, { timeoutMs, maxResponseBytes: o.maxResponseBytes });
  let res: Response;
  try {
    res = await fetcher(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(context.endpointKey ? { authorization: `Bearer ${context.endpointKey}` } : {}) },
      body,
      ...(signal ? { signal } : {}),
    });
    if (!res.ok) {
      await res.body?.cancel();
      throw new RolloutFailure(`the rollout endpoint answered HTTP ${res.status}`);
    }
    return await res.text();
  } catch (err) {
    if (err instanceof OutboundError) throw new RolloutFailure(`the rollout endpoint: ${err.message}`);
    throw err;
  }
}

function runCommand(command: string[], body: string, o: RolloutOptions, timeoutMs: number, signal: AbortSignal | undefined): Promise<string> {
  return new Promise((resolve, reject) => {
    // Its own process group, so the time limit kills whatever the agent started too.
    const child = spawn(command[0]!, command.slice(1), { stdio: ['pipe', 'pipe', 'inherit'], detached: true });
    const chunks: Buffer[] = [];
    let size = 0;
    let failure: RolloutFailure | null = null;
    const kill = (why: RolloutFailure) => {
      failure ??= why;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
    };
    const timer = setTimeout(() => kill(new RolloutFailure(`the rollout command did not answer within ${timeoutMs} ms`)), timeoutMs);
    const onAbort = () => kill(new RolloutFailure('the rollout was cancelled'));
    signal?.addEventListener('abort', onAbort, { once: true });
    child.stdout.on('data', (c: Buffer) => {
      size += c.length;
      if (size > o.maxResponseBytes) return kill(new RolloutFailure(`the rollout command wrote more than ${o.maxResponseBytes} bytes`));
      chunks.push(c);
    });
    child.stdin.on('error', () => undefined); // a command that exits without reading its input
    child.on('error', (err: NodeJS.ErrnoException) => {
      failure ??= new RolloutFailure(`the rollout command could not start (${err.code ?? 'error'})`);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      if (failure) return reject(failure);
      if (code !== 0) return reject(new RolloutFailure(`the rollout command exited with code ${code}`));
      resolve(Buffer.concat(chunks).toString('utf8'));
    });
    child.stdin.end(body);
  });
}

export async function playRollout(input: RolloutInput): Promise<EpisodeResult> {
  const started = performance.now();
  const transcript: TranscriptEntry[] = [];
  const tokens = { prompt: 0, completion: 0 };
  let steps = 0;
  try {
    const task = parseWith(RolloutTask, input.task, 'rollout task');
    const options = parseWith(RolloutOptions, input.options, 'rollout options');
    if (options.command && !input.context.allowCommands) throw new RolloutFailure('a rollout command runs only in embedded runs from a config file; give the agent an https url');
    const timeoutMs = Math.max(1, Math.min(options.timeoutMs, input.deadline - Date.now()));
    const body = JSON.stringify({ task, seed: input.seed, inference: input.grant });
    transcript.push({ kind: 'observation', step: 0, text: JSON.stringify({ task, seed: input.seed }), done: false });
    const text = options.url ? await callEndpoint(options.url, body, options, input.context, timeoutMs, input.signal) : await runCommand(options.command!, body, options, timeoutMs, input.signal);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new RolloutFailure('the rollout answer is not JSON: it must be {"reward": number, "info"?: object}');
    }
    const answer = RolloutAnswer.safeParse(json);
    if (!answer.success) throw new RolloutFailure(`the rollout answer is not {"reward": number, "info"?: object}: ${answer.error.issues.map((i) => `${i.path.join('.') || '(answer)'}: ${i.message}`).join('; ')}`);
    const usage = await input.usage();
    steps = usage.calls;
    tokens.prompt = usage.promptTokens;
    tokens.completion = usage.completionTokens;
    if (usage.calls === 0) throw new RolloutFailure("the rollout never called its member's model with its key (0 calls): its reward is refused");
    transcript.push({ kind: 'observation', step: steps, text: `reward ${answer.data.reward}`, done: true, reward: answer.data.reward, ...(answer.data.info ? { info: answer.data.info } : {}) });
    return { reward: answer.data.reward, steps, transcript, tokens, inferenceMs: 0, durationMs: performance.now() - started, stopReason: 'done', error: null };
  } catch (err) {
    const deadlinePassed = Date.now() >= input.deadline;
    const message = err instanceof Error ? err.message : String(err);
    return {
      reward: 0,
      steps,
      transcript,
      tokens,
      inferenceMs: 0,
      durationMs: performance.now() - started,
      stopReason: deadlinePassed ? 'deadline' : input.signal?.aborted ? 'aborted' : 'error',
      error: (deadlinePassed ? `deadline: ${message}` : message).slice(0, 2000),
    };
  }
}
