/**
 * The Environment port: one interface for every domain (sudoku, tools, web, heuristic design).
 * An episode is multi-turn: reset → observation, then step(action text) until done or the horizon;
 * one scalar reward comes back at the end (sparse and terminal unless an environment says otherwise).
 */
import type { z } from 'zod';
import type { EnvironmentName } from '../shared/schemas/index.ts';
import type { ActionConstraint, Policy, PolicyReply, ToolSpec } from '../shared/ports/policy.ts';
import type { ObjectStore } from '../shared/ports/object-store.ts';
import type { OutboundPolicy } from './outbound/address-policy.ts';

export interface StepResult {
  observation: string;
  done: boolean;
  /** Present on the final step (and on intermediate steps only for shaped rewards). */
  reward?: number;
  info: Record<string, unknown>;
}

/** One live episode of one task. */
export interface Environment {
  /** Maximum number of steps (actions) before the episode ends with the reward earned so far. */
  readonly horizon: number;
  /** Describes the action format; becomes the system message of the chat. */
  readonly systemPrompt: string;
  /** Tools the environment accepts in the chat API's `tool_calls` form, if any (passed to the policy). */
  readonly tools?: ToolSpec[];
  /**
   * The format the next reply must take, asked before every turn (it may follow the state: only the
   * blank cells, only the open pages). Policies that can, decode only matching replies; step() still
   * judges every action, since a policy may ignore it.
   */
  actionConstraint?(): ActionConstraint | undefined;
  reset(seed: number): Promise<string>;
  /** The raw action text, or the whole reply when the policy used the chat API's `tool_calls` form. */
  step(action: PolicyReply): Promise<StepResult>;
  /**
   * What the episode looks like now, as PNG bytes (web pages on Chromium), or null where nothing is drawn.
   * The runner asks for it after reset and after every step when the agent is shown it or a trace keeps it.
   */
  screenshot?(): Promise<Uint8Array | null>;
  /** The agent is shown `screenshot()` with each observation (an image part of the user turn). */
  readonly showsScreenshot?: boolean;
  /** Frees what the episode holds (a browser context, an isolate). Safe to call twice. */
  close(): Promise<void>;
}

export interface SampledTask<Task> {
  id: string;
  task: Task;
}

/**
 * train: tasks to learn from; eval: held-out tasks for the reported results; validation: held-out tasks for
 * choosing settings before any eval task is looked at (environments/task-sampler.ts says how they are kept apart).
 */
export type Split = 'train' | 'eval' | 'validation';

/**
 * What the place an episode runs in grants it, beyond the task and options. The defaults are a deployed
 * stack's (public endpoints only, no commands): an embedded run passes its own.
 */
export interface EnvironmentContext {
  /** Which addresses endpoints named in options may reach (environments/outbound/address-policy.ts). */
  outbound: OutboundPolicy;
  /**
   * The key for the endpoint the options name (an environment server's), read from the secret store by the
   * Episode function; sent only to that endpoint's origin, never recorded.
   */
  endpointKey?: string;
  /** Whether options may start local programs (an MCP server's stdio command): embedded runs from a config file only. */
  allowCommands: boolean;
  /** The stack's store (or an embedded run's), where what options pin lives: a pushed task folder's files. */
  store?: Pick<ObjectStore, 'get'>;
}

/** An option that names something the store does not hold; `path` is inside the options (`miniwob.folder.name`). */
export class OptionsIssue extends Error {
  constructor(
    readonly path: string,
    message: string,
  ) {
    super(message);
  }
}

export const DEPLOYED_CONTEXT: EnvironmentContext = { outbound: { allow: [] }, allowCommands: false };

/** A domain: validates tasks and options, creates episodes, samples tasks, and knows its scripted policies. */
export interface EnvironmentDefinition<Task = unknown, Options = unknown> {
  readonly name: EnvironmentName;
  readonly taskSchema: z.ZodType<Task>;
  readonly optionsSchema: z.ZodType<Options>;
  /** `context` defaults to DEPLOYED_CONTEXT: built-in environments that reach nothing outside ignore it. */
  create(task: Task, options: Options, context?: EnvironmentContext): Promise<Environment>;
  /**
   * Whether a task fits the options, without starting anything: the reason it does not, or null. What the task
   * schema alone cannot say (a web app task's start on an origin the options allow). Checked at the API's door.
   */
  taskIssue?(task: Task, options: Options): string | null;
  /**
   * The options with what they name in the store pinned to its content (a pushed task folder's manifest and
   * task names), when a run or an evaluation is created, so every episode sees the same thing. Throws an
   * OptionsIssue for a name the store does not hold.
   */
  pinOptions?(options: Options, store: Pick<ObjectStore, 'get'>): Promise<Options>;
  /** Deterministic in (split, n, seed); train never shares a task with eval or validation. */
  sampleTasks(split: Split, n: number, seed: number, options: Options): SampledTask<Task>[];
  /** A policy that solves the task (used by tests, baselines and imitation data). */
  oracle(task: Task, options: Options): Policy;
  /** A policy that plays legal but random actions, seeded. */
  random(task: Task, options: Options, seed: number): Policy;
}
