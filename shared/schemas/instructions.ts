/**
 * Instructions, the paper's c_t: the text a policy π(a | o, c) is conditioned on besides its observations —
 * a system text and named skill documents, pushed to the store by content like task suites (layout in
 * shared/keys.ts, catalog in shared/instructions-catalog.ts). A run or an evaluation names them and pins the
 * manifest when it is created; every episode request carries the documents themselves (bounded below), so
 * the Episode function reads nothing more. Without instructions an episode's system message is its
 * environment's own prompt, as it always was.
 */
import { z } from 'zod';
import { Sha256 } from './model-store.ts';

/** The bounds a push checks; their sum is what an episode request may carry (documented in docs/ENVIRONMENTS.md, "Instructions"). */
export const INSTRUCTIONS_LIMITS = {
  /** The system text, UTF-8. */
  systemBytes: 32 * 1024,
  /** One skill document, UTF-8. */
  skillBytes: 32 * 1024,
  skills: 16,
  /** The system text and every skill together: what one episode request carries (a Lambda event holds 256 KiB). */
  totalBytes: 64 * 1024,
} as const;

/** Where a system text puts the environment's own prompt (the action format), when it wants it. */
export const ENVIRONMENT_PROMPT_SLOT = '{{environment}}';

export const InstructionsName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/, 'must be 1-64 characters of letters, digits, "_" or "-", starting with a letter or digit')
  .describe('instructions name');
export type InstructionsName = z.infer<typeof InstructionsName>;

export const SkillName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, 'must be 1-64 characters of letters, digits, "_", "." or "-", starting with a letter or digit')
  .describe('skill name');

const bytes = (s: string) => Buffer.byteLength(s, 'utf8');

/** The stored documents: an optional system text (absent: the environment's prompt) and the skills in order. */
export const Instructions = z
  .object({
    system: z.string().min(1).optional(),
    skills: z.array(z.object({ name: SkillName, text: z.string().min(1) }).strict()).max(INSTRUCTIONS_LIMITS.skills).default([]),
  })
  .strict()
  .superRefine((d, ctx) => {
    if (d.system === undefined && d.skills.length === 0) ctx.addIssue({ code: 'custom', path: [], message: 'instructions hold a system text, skills, or both' });
    if (d.system !== undefined && bytes(d.system) > INSTRUCTIONS_LIMITS.systemBytes) ctx.addIssue({ code: 'custom', path: ['system'], message: `is ${bytes(d.system)} bytes; at most ${INSTRUCTIONS_LIMITS.systemBytes}` });
    const seen = new Set<string>();
    d.skills.forEach((s, i) => {
      if (seen.has(s.name)) ctx.addIssue({ code: 'custom', path: ['skills', i, 'name'], message: `skill ${JSON.stringify(s.name)} is there twice` });
      seen.add(s.name);
      if (bytes(s.text) > INSTRUCTIONS_LIMITS.skillBytes) ctx.addIssue({ code: 'custom', path: ['skills', i, 'text'], message: `is ${bytes(s.text)} bytes; at most ${INSTRUCTIONS_LIMITS.skillBytes}` });
    });
    const total = bytes(d.system ?? '') + d.skills.reduce((a, s) => a + bytes(s.text), 0);
    if (total > INSTRUCTIONS_LIMITS.totalBytes) ctx.addIssue({ code: 'custom', path: [], message: `the documents are ${total} bytes together; at most ${INSTRUCTIONS_LIMITS.totalBytes} (each episode request carries them)` });
  });
export type Instructions = z.infer<typeof Instructions>;
/** As written: `skills` may be left out. */
export type InstructionsInput = z.input<typeof Instructions>;

/** How a run or an evaluation names instructions; `manifest` is filled in (pinned) when it is created. */
export const InstructionsRef = z.object({ name: InstructionsName, manifest: Sha256.optional() }).strict();
export type InstructionsRef = z.infer<typeof InstructionsRef>;

/** `"instructions": "name"` is read as `{ name }`, and stored pinned. */
export const InstructionsChoice = z.union([InstructionsName.transform((name): InstructionsRef => ({ name })), InstructionsRef]);

/** Which instructions an episode ran under: what manifests, logs, artifacts and transcripts record. */
export const PinnedInstructions = z.object({ name: InstructionsName, manifest: Sha256 }).strict();
export type PinnedInstructions = z.infer<typeof PinnedInstructions>;

/** What an episode request carries: the pinned reference and the documents themselves. */
export const EpisodeInstructions = z.object({ name: InstructionsName, manifest: Sha256, documents: Instructions }).strict();
export type EpisodeInstructions = z.infer<typeof EpisodeInstructions>;

/** `instructions/names/{name}.json`: the manifest a name points at now, with what it holds. */
export const NamedInstructions = z
  .object({
    name: InstructionsName,
    manifestSha256: Sha256,
    systemBytes: z.number().int().min(0),
    skills: z.array(SkillName),
    pushedAt: z.iso.datetime(),
  })
  .strict();
export type NamedInstructions = z.infer<typeof NamedInstructions>;
