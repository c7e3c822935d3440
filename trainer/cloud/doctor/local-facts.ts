/**
 * The deploying machine's side of the preflight: its tar (SST packs the box artifact with it), its Node, and
 * the build tools `esopt dev rehearse` compiles its Lambda runtime client with (build-tools.ts).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { missingBuildTools } from './build-tools.ts';
import type { DoctorFacts } from './prerequisites.ts';

export async function localFacts(): Promise<Pick<DoctorFacts, 'tar' | 'node' | 'rehearsalBuildTools'>> {
  const tar = await promisify(execFile)('tar', ['--version'], { timeout: 10_000 })
    .then((r) => ({ ok: true as const, value: r.stdout.split('\n')[0].trim() }))
    .catch((err: Error) => ({ ok: false as const, error: err.message }));
  return { tar, node: process.versions.node, rehearsalBuildTools: { missing: missingBuildTools() } };
}
