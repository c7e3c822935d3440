import { z } from 'zod';

/**
 * Identifiers that become parts of store keys and file paths. They are deliberately narrow
 * (no `/`, no `.` at the start, no whitespace) so a key built from them can never escape its prefix.
 */
export const Id = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/, 'must be 1-64 characters of letters, digits, "_" or "-", starting with a letter or digit');
export type Id = z.infer<typeof Id>;

export const RunId = Id.describe('run id');
export const TaskId = Id.describe('task id');
export const Iteration = z.number().int().min(0).max(1_000_000_000);
export const MemberIndex = z.number().int().min(0).max(1_000_000);
/** A 32-bit unsigned seed: everything random in a run is a pure function of seeds like this. */
export const Seed = z.number().int().min(0).max(0xffffffff);
