/** The web task and options schemas. A task is a task type and the seed its page is generated from. */
import { z } from 'zod';
import { Seed, TaskFolderName, TaskFolderRef } from '../../shared/schemas/index.ts';
import { AppCheck, AppOptions } from './app-check.ts';
import { WebActionGrammar, WebObservation } from './agent-interface.ts';
import { TASK_TYPE_NAMES } from './task-types/index.ts';

export const WebTaskTypeName = z.enum(TASK_TYPE_NAMES);

/** A page of one of the built-in task types, generated from its seed. */
export const GeneratedWebTask = z.object({ type: WebTaskTypeName, seed: Seed }).strict();
export type GeneratedWebTask = z.infer<typeof GeneratedWebTask>;

/** A task page of a MiniWoB++-layout folder (`html/miniwob/<name>.html`, options `miniwob.dir`), seeded as MiniWoB seeds it. */
export const MiniwobTaskName = z.string().regex(/^[a-z0-9][a-z0-9-]{0,63}$/, 'a MiniWoB task name: lower-case letters, digits and -');
export const MiniwobWebTask = z.object({ miniwob: MiniwobTaskName, seed: Seed }).strict();
export type MiniwobWebTask = z.infer<typeof MiniwobWebTask>;

/**
 * A task on a user's own web app (options `app`; environments/web/app-task.ts): where the episode starts, the
 * goal the agent is given, and how esopt judges the end — never the page itself.
 */
export const AppWebTask = z
  .object({
    /** A path on the app (`/todos`) or an absolute URL on one of the origins the options allow. */
    start: z.string().min(1).max(2048),
    goal: z.string().min(1).max(4000),
    check: AppCheck,
  })
  .strict();
export type AppWebTask = z.infer<typeof AppWebTask>;

export const WebTask = z.union([GeneratedWebTask, MiniwobWebTask, AppWebTask]);
export type WebTask = z.infer<typeof WebTask>;

/** Where Chromium is looked for when neither the options nor ESOPT_CHROMIUM name an executable. */
export const DEFAULT_CHROMIUM = '/usr/bin/chromium';

export const WebOptions = z
  .object({
    /** chromium: a real browser (evaluation); happy-dom: in-process DOM, fast (training, unit tests). */
    backend: z.enum(['chromium', 'happy-dom']).default('chromium'),
    /** Chromium executable, or "lambda" for the Lambda build; default: the rule in chromium-executable.ts ($ESOPT_CHROMIUM, the Lambda build on Lambda, /usr/bin/chromium, the Lambda build). */
    executablePath: z.string().min(1).optional(),
    /** Task types that sampled tasks draw from (all by default). */
    taskTypes: z.array(WebTaskTypeName).min(1).optional(),
    /** Lines of the page shown per observation; `scroll` moves by half of it. */
    screenLines: z.number().int().min(5).max(500).default(30),
    /** Longest one action (or loading the page) may take before the episode is ended. */
    actionTimeoutMs: z.number().int().min(50).max(120_000).default(5_000),
    /** Longest a whole episode may take, from reset. */
    episodeTimeoutMs: z.number().int().min(100).max(3_600_000).default(120_000),
    /**
     * A MiniWoB++-layout folder on this machine (embedded runs; a deployed stack refuses paths): its
     * `html/miniwob/<task>.html` pages served unmodified, tasks `{ miniwob, seed }` (environments/web/miniwob.ts).
     */
    miniwob: z
      .object({
        /** A folder on this machine (embedded runs). */
        dir: z.string().min(1).optional(),
        /** A folder pushed to the store (`esopt tasks push DIR --name NAME`), by name; pinned to its manifest when a run or an evaluation is created. */
        folder: z.union([TaskFolderName.transform((name): TaskFolderRef => ({ name })), TaskFolderRef]).optional(),
        /** The pages sampled tasks draw from (all of html/miniwob/ by default). */
        tasks: z.array(MiniwobTaskName).min(1).optional(),
        /** Page time each action takes on the page's virtual clock: MiniWoB's episode timer counts actions, not the agent's thinking. */
        stepMs: z.number().int().min(1).max(60_000).default(1_000),
        /** The most actions an episode may take. */
        horizon: z.number().int().min(1).max(200).default(10),
      })
      .strict()
      .refine((m) => (m.dir === undefined) !== (m.folder === undefined), { message: 'name the folder one way: dir (a path on this machine) or folder (pushed with esopt tasks push)' })
      .optional(),
    /** A user's own web app: its origin and the others its pages may load from; tasks `{ start, goal, check }`. */
    app: AppOptions.optional(),
    /**
     * What the agent sees each turn, one or several: `text` (the text view, a window `screenLines` long),
     * `axtree` (the whole page as an accessibility tree), `screenshot` (a PNG image part; Chromium only).
     */
    observation: z
      .array(WebObservation)
      .min(1)
      .refine((views) => new Set(views).size === views.length, 'each view at most once')
      .default(['text']),
    /** Screenshots carry each element's id at its corner (the ids the text view and the tree show). */
    markIds: z.boolean().default(false),
    /** The language of the agent's replies (environments/web/action-grammar.ts; docs/ENVIRONMENTS.md has one example each). */
    actions: WebActionGrammar.default('esopt'),
  })
  .strict()
  .superRefine((o, ctx) => {
    const draws = o.backend === 'chromium';
    if (o.observation.includes('screenshot') && !draws) ctx.addIssue({ code: 'custom', path: ['observation'], message: 'a screenshot observation needs backend "chromium" (happy-dom draws nothing)' });
    if (o.actions === 'coordinates' && !o.observation.includes('screenshot')) ctx.addIssue({ code: 'custom', path: ['actions'], message: 'coordinates are pixels of a screenshot: add "screenshot" to observation' });
    if (o.markIds && !o.observation.includes('screenshot')) ctx.addIssue({ code: 'custom', path: ['markIds'], message: 'markIds draws ids on screenshots: add "screenshot" to observation' });
  });
export type WebOptions = z.infer<typeof WebOptions>;
