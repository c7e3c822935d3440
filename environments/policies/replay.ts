/** `replay:FILE`: a JSON array of raw action texts, played in order. */
import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import type { Policy } from '../../shared/ports/policy.ts';
import { scriptedPolicy } from './scripted.ts';

export const ReplayScript = z.array(z.string()).max(100_000);

export async function loadReplay(file: string): Promise<Policy> {
  let json: unknown;
  try {
    json = JSON.parse(await readFile(file, 'utf8'));
  } catch (err) {
    throw new Error(`replay file ${file}: ${(err as Error).message}`);
  }
  const r = ReplayScript.safeParse(json);
  if (!r.success) throw new Error(`replay file ${file} must be a JSON array of action strings:\n${z.prettifyError(r.error)}`);
  return scriptedPolicy(r.data, `replay file ${file}`);
}
