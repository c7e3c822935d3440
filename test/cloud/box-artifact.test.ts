/**
 * trainer/cloud/box/box-artifact.ts builds the box's tarball once per tree: a build of a tree built before
 * into the same directory gives the same artifact without compressing again, and a cached tarball that no
 * longer has the hash its name says is built afresh, never returned.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildBoxArtifact } from '../../trainer/cloud/box/box-artifact.ts';

const outDir = mkdtempSync(join(tmpdir(), 'esopt-box-artifact-'));
afterAll(() => rmSync(outDir, { recursive: true, force: true }));
const sha256 = (path: string) => createHash('sha256').update(readFileSync(path)).digest('hex');

describe('buildBoxArtifact', () => {
  it('gives the same artifact for the same tree, and rebuilds a cached tarball that lost its hash', () => {
    const first = buildBoxArtifact(process.cwd(), outDir);
    expect(sha256(first.path)).toBe(first.sha256);
    expect(first.key).toBe(`artifacts/esopt-${first.sha256}.tgz`);
    const bytes = readFileSync(first.path);

    // The tar it was made of names it, so the next build of the same tree finds it.
    const index = readdirSync(outDir).filter((f) => /^tar-[0-9a-f]{64}\.sha256$/.test(f));
    expect(index.map((f) => readFileSync(join(outDir, f), 'utf8'))).toEqual([first.sha256]);
    expect(buildBoxArtifact(process.cwd(), outDir)).toEqual(first);

    writeFileSync(first.path, 'not the tarball');
    const rebuilt = buildBoxArtifact(process.cwd(), outDir);
    expect(rebuilt).toEqual(first);
    expect(readFileSync(rebuilt.path).equals(bytes)).toBe(true);
  });
});
