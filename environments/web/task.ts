/** The web task and options schemas. A task is a task type and the seed its page is generated from. */
import { z } from 'zod';
import { Seed } from '../../shared/schemas/index.ts';
import { TASK_TYPE_NAMES } from './task-types/index.ts';

export const WebTaskTypeName = z.enum(TASK_TYPE_NAMES);

export const WebTask = z.object({ type: WebTaskTypeName, seed: Seed }).strict();
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
  })
  .strict();
export type WebOptions = z.infer<typeof WebOptions>;
