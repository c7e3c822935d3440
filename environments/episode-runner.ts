/**
 * Drives any Policy through one episode of one environment: at most H steps, every observation and
 * action recorded, and never a crash — a policy or environment that throws, an aborted signal or a
 * passed deadline all end the episode with `error` set (and the reward earned so far).
 */
import { z } from 'zod';
import type { ChatMessage, Policy, PolicyReply } from '../shared/ports/policy.ts';
import type { Environment, EnvironmentContext, EnvironmentDefinition } from './environment.ts';
import { parseWith } from './index.ts';
import { IterationClosedError } from './policies/http-errors.ts';
import { PinnedInstructions, type EpisodeInstructions } from '../shared/schemas/index.ts';
import { systemMessage } from './system-message.ts';

export const TranscriptEntry = z.discriminatedUnion('kind', [
  /** `instructions`: the pushed instructions (c_t) the text was composed from; absent: the environment's own prompt. */
  z.object({ kind: z.literal('system'), text: z.string(), instructions: PinnedInstructions.optional() }),
  z.object({
    kind: z.literal('observation'),
    step: z.number().int().min(0),
    text: z.string(),
    done: z.boolean(),
    reward: z.number().optional(),
    info: z.record(z.string(), z.unknown()).optional(),
    /** The name the trace kept this step's screenshot under (`frames`), when it kept one. */
    frame: z.string().optional(),
  }),
  z.object({
    kind: z.literal('action'),
    step: z.number().int().min(0),
    text: z.string(),
    toolCalls: z.array(z.object({ name: z.string(), arguments: z.unknown() })).optional(),
    /** `cached`: prompt tokens the policy's prefix cache served, where it says. */
    tokens: z.object({ prompt: z.number().int().min(0), completion: z.number().int().min(0), cached: z.number().int().min(0).optional() }),
    inferenceMs: z.number().min(0),
  }),
]);
export type TranscriptEntry = z.infer<typeof TranscriptEntry>;

/** Why the episode stopped; `error` is non-null exactly for the last four. */
export const StopReason = z.enum(['done', 'horizon', 'error', 'aborted', 'deadline', 'iteration-closed']);
export type StopReason = z.infer<typeof StopReason>;

export const EpisodeResult = z.object({
  /** The last reward the environment reported (0 when it reported none). */
  reward: z.number(),
  steps: z.number().int().min(0),
  transcript: z.array(TranscriptEntry),
  tokens: z.object({ prompt: z.number().int().min(0), completion: z.number().int().min(0) }),
  inferenceMs: z.number().min(0),
  durationMs: z.number().min(0),
  stopReason: StopReason,
  error: z.string().nullable(),
});
export type EpisodeResult = z.infer<typeof EpisodeResult>;

interface EpisodeCommon {
  policy: Policy;
  seed: number;
  signal?: AbortSignal;
  /** Absolute deadline (epoch milliseconds or a Date); the episode is abandoned when it passes. */
  deadline?: number | Date;
  /** The run's or evaluation's instructions (c_t): the system message is composed from them (system-message.ts). */
  instructions?: EpisodeInstructions;
  /** Keeps each step's screenshot for the episode's trace (environments that draw one). */
  frames?: FrameSink;
}

/**
 * Keeps the screenshot of step `step` (0: after reset); resolves the name it was kept under, recorded as the
 * observation's `frame`. A sink that fails costs the trace that frame, never the episode.
 */
export type FrameSink = (step: number, png: Uint8Array) => Promise<string>;

function dataUrl(png: Uint8Array): string {
  return `data:image/png;base64,${Buffer.from(png).toString('base64')}`;
}

/** Only the newest screenshot stays in the chat: earlier turns keep their text, so a prompt grows by text alone. */
function dropOlderImages(messages: ChatMessage[]): void {
  for (let i = 0; i < messages.length; i++) if (messages[i]!.images) messages[i] = { ...messages[i]!, images: undefined };
}
export type EpisodeInput =
  | (EpisodeCommon & { environment: Environment })
  /** `task` and `options` are raw JSON values, validated by the definition's schemas. */
  | (EpisodeCommon & { definition: EnvironmentDefinition; task: unknown; options?: unknown; context?: EnvironmentContext });

class DeadlineError extends Error {}

/** The assistant turn as the next prompt shows it: a `tool_calls` reply is spelled out as JSON. */
function assistantText(reply: PolicyReply): string {
  if (reply.text.trim() !== '' || !reply.toolCalls?.length) return reply.text;
  return reply.toolCalls.map((c) => JSON.stringify({ tool: c.name, arguments: c.arguments })).join('\n');
}

/**
 * The turns the next prompt adds: a `tool_calls` reply to an environment that offers tools goes back as the
 * assistant's call (the one the environment ran) and a `tool` message with its result; anything else as text.
 */
function nextTurns(reply: PolicyReply, observation: string, step: number, offersTools: boolean): ChatMessage[] {
  const call = reply.toolCalls?.[0];
  if (!offersTools || !call) return [{ role: 'assistant', content: assistantText(reply) }, { role: 'user', content: observation }];
  const id = call.id ?? `call_${step}`;
  return [
    { role: 'assistant', content: reply.text, toolCalls: [{ ...call, id }] },
    { role: 'tool', content: observation, toolCallId: id },
  ];
}

/**
 * Settles with `work`, or rejects as soon as `signal` aborts: an environment step that hangs (a page
 * that never loads) or a policy deaf to its signal cannot hold an episode past its deadline. The work is abandoned, not cancelled;
 * `close()` in the runner frees what it holds.
 */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

export async function runEpisode(input: EpisodeInput): Promise<EpisodeResult> {
  const started = performance.now();
  const transcript: TranscriptEntry[] = [];
  const tokens = { prompt: 0, completion: 0 };
  let inferenceMs = 0;
  let reward = 0;
  let steps = 0;
  let stopReason: StopReason = 'horizon';
  let error: string | null = null;

  // One signal for the policy: the caller's abort or the deadline, whichever comes first.
  const controller = new AbortController();
  const deadlineMs = input.deadline === undefined ? undefined : Number(input.deadline);
  const onAbort = () => controller.abort(input.signal?.reason ?? new Error('aborted'));
  input.signal?.addEventListener('abort', onAbort, { once: true });
  if (input.signal?.aborted) onAbort();
  const timer = deadlineMs === undefined ? undefined : setTimeout(() => controller.abort(new DeadlineError('deadline passed')), Math.max(0, deadlineMs - Date.now()));
  const checkStop = () => {
    if (controller.signal.aborted) throw controller.signal.reason instanceof Error ? controller.signal.reason : new Error(String(controller.signal.reason));
    if (deadlineMs !== undefined && Date.now() >= deadlineMs) throw new DeadlineError('deadline passed');
  };

  let environment: Environment | undefined;
  try {
    if ('environment' in input) environment = input.environment;
    else {
      const { definition } = input;
      const task = parseWith(definition.taskSchema, input.task, `${definition.name} task`);
      const options = parseWith(definition.optionsSchema, input.options ?? {}, `${definition.name} options`);
      const creating = definition.create(task, options, input.context);
      try {
        environment = await untilAborted(creating, controller.signal);
      } catch (err) {
        // An environment that arrives after the episode gave up is closed, not leaked (an MCP server's program).
        void creating.then((late) => late.close()).catch(() => undefined);
        throw err;
      }
    }
    const system = systemMessage(environment.systemPrompt, input.instructions?.documents);
    const pinned = input.instructions ? { name: input.instructions.name, manifest: input.instructions.manifest } : undefined;
    transcript.push({ kind: 'system', text: system, ...(pinned ? { instructions: pinned } : {}) });
    checkStop();
    const first = await untilAborted(environment.reset(input.seed), controller.signal);
    const env = environment;
    // The screenshot of the state an observation describes: shown to the agent, kept for the trace, or both.
    const look = async (step: number): Promise<{ images?: string[]; frame?: string }> => {
      if (!env.screenshot || !(env.showsScreenshot || input.frames)) return {};
      const png = await untilAborted(env.screenshot(), controller.signal);
      if (!png) return {};
      const frame = input.frames ? await input.frames(step, png).catch(() => undefined) : undefined;
      return { ...(env.showsScreenshot ? { images: [dataUrl(png)] } : {}), ...(frame ? { frame } : {}) };
    };
    const firstLook = await look(0);
    transcript.push({ kind: 'observation', step: 0, text: first, done: false, ...(firstLook.frame ? { frame: firstLook.frame } : {}) });
    const messages: ChatMessage[] = [
      { role: 'system', content: system },
      { role: 'user', content: first, ...(firstLook.images ? { images: firstLook.images } : {}) },
    ];
    while (steps < environment.horizon) {
      checkStop();
      // Raced against the signal too, so a policy that ignores its signal cannot outlive the deadline.
      const constraint = environment.actionConstraint?.();
      const context = { step: steps, signal: controller.signal, ...(environment.tools ? { tools: environment.tools } : {}), ...(constraint ? { constraint } : {}) };
      const reply = await untilAborted(input.policy.act(messages.slice(), context), controller.signal);
      checkStop();
      tokens.prompt += reply.tokens.prompt;
      tokens.completion += reply.tokens.completion;
      inferenceMs += reply.inferenceMs;
      transcript.push({
        kind: 'action',
        step: steps,
        text: reply.text,
        ...(reply.toolCalls?.length ? { toolCalls: reply.toolCalls } : {}),
        tokens: reply.tokens,
        inferenceMs: reply.inferenceMs,
      });
      const result = await untilAborted(environment.step(reply), controller.signal);
      steps++;
      if (result.reward !== undefined) reward = result.reward;
      // The last state is kept for the trace too, though no agent will see it.
      const seen = await look(steps);
      transcript.push({
        kind: 'observation',
        step: steps,
        text: result.observation,
        done: result.done,
        ...(result.reward !== undefined ? { reward: result.reward } : {}),
        info: result.info,
        ...(seen.frame ? { frame: seen.frame } : {}),
      });
      if (result.done) {
        stopReason = 'done';
        break;
      }
      const turns = nextTurns(reply, result.observation, steps, Boolean(environment.tools?.length));
      if (seen.images) {
        dropOlderImages(messages);
        turns[turns.length - 1] = { ...turns[turns.length - 1]!, images: seen.images };
      }
      messages.push(...turns);
    }
  } catch (err) {
    if (err instanceof IterationClosedError) stopReason = 'iteration-closed';
    else if (err instanceof DeadlineError || controller.signal.reason instanceof DeadlineError) stopReason = 'deadline';
    else if (controller.signal.aborted) stopReason = 'aborted';
    else stopReason = 'error';
    const message = err instanceof Error ? err.message : String(err);
    error = stopReason === 'error' ? message : `${stopReason}: ${message}`;
  } finally {
    clearTimeout(timer);
    input.signal?.removeEventListener('abort', onAbort);
    try {
      await environment?.close();
    } catch (err) {
      error ??= `close failed: ${(err as Error).message}`;
    }
  }
  if (!Number.isFinite(reward)) {
    error ??= `environment reported a non-finite reward (${reward})`;
    reward = 0;
  }
  return { reward, steps, transcript, tokens, inferenceMs, durationMs: performance.now() - started, stopReason, error: error?.slice(0, 2000) ?? null };
}
