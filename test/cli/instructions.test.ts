/**
 * `esopt instructions push|list|show` and `esopt episode --instructions`: documents pushed by content (the
 * same bytes once), a bad push refused naming what is wrong and storing nothing, and an episode played
 * under them saying which instructions (name and manifest) its system message came from.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { sudoku } from '../../environments/sudoku/definition.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { main } from '../../trainer/cli/main.ts';

const dir = mkdtempSync(join(tmpdir(), 'esopt-instructions-cli-'));
const store = join(dir, 'store');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function run(argv: string[]) {
  let out = '';
  let err = '';
  const io = { stdout: (t: string) => void (out += `${t}\n`), stderr: (t: string) => void (err += `${t}\n`), readStdin: async () => '' };
  return main(argv, io).then((code) => ({ code, out, err }));
}

describe('esopt instructions', () => {
  it('pushes by content, lists and shows; an episode under them names name and manifest', async () => {
    writeFileSync(join(dir, 'system.md'), 'Be brief.\n{{environment}}');
    writeFileSync(join(dir, 'corners.md'), 'Start in a corner.');
    const first = await run(['instructions', 'push', '--name', 'brief', '--system', join(dir, 'system.md'), join(dir, 'corners.md'), '--store', store, '--json']);
    expect(first.code, first.err).toBe(0);
    const pushed = JSON.parse(first.out) as { manifestSha256: string; skills: string[]; stored: boolean };
    expect(pushed).toMatchObject({ skills: ['corners'], stored: true });
    const again = JSON.parse((await run(['instructions', 'push', '--name', 'same', '--system', join(dir, 'system.md'), join(dir, 'corners.md'), '--store', store, '--json'])).out);
    expect(again).toMatchObject({ manifestSha256: pushed.manifestSha256, stored: false });

    const list = await run(['instructions', 'list', '--store', store]);
    expect(list.out).toMatch(/^brief\t/m);
    expect(list.out).toMatch(/^same\t/m);
    const show = await run(['instructions', 'show', 'brief', '--store', store]);
    expect(show.out).toContain(`manifest ${pushed.manifestSha256}`);
    expect(show.out).toContain('── skill corners\nStart in a corner.');

    const task = JSON.stringify(sudoku.sampleTasks('train', 1, 0, sudoku.optionsSchema.parse({ size: 4, blanks: 2 }))[0].task);
    const episode = await run(['episode', '--env', 'sudoku', '--task', task, '--options', '{"size":4,"blanks":2}', '--policy', 'oracle', '--instructions', 'brief', '--store', store]);
    expect(episode.code, episode.err).toBe(0);
    expect(episode.out).toContain(`── system (instructions brief, manifest ${pushed.manifestSha256})\nBe brief.\n`);
    expect(episode.out).toContain('## Skill: corners\n\nStart in a corner.');
    const plain = await run(['episode', '--env', 'sudoku', '--task', task, '--options', '{"size":4,"blanks":2}', '--policy', 'oracle']);
    expect(plain.out).toMatch(/^── system \(the environment's prompt\)\n/);
    expect(plain.out).not.toContain('Be brief.');
  });

  it('refuses duplicate skills, unknown names and a push with nothing, storing nothing', async () => {
    const other = join(dir, 'other-store');
    writeFileSync(join(dir, 'a.md'), 'one');
    const twice = await run(['instructions', 'push', '--name', 'dup', join(dir, 'a.md'), join(dir, 'a.md'), '--store', other]);
    expect(twice.code).toBe(2);
    expect(twice.err).toMatch(/skills\.1\.name: skill "a" is there twice/);
    expect((await run(['instructions', 'push', '--name', 'none', '--store', other])).err).toMatch(/give --system FILE, skill files, or both/);
    expect(await new FsObjectStore(other).list('instructions/')).toEqual([]);
    const task = JSON.stringify(sudoku.sampleTasks('train', 1, 0, sudoku.optionsSchema.parse({}))[0].task);
    const unknown = await run(['episode', '--env', 'sudoku', '--task', task, '--policy', 'oracle', '--instructions', 'nobody', '--store', other]);
    expect(unknown.code).toBe(2);
    expect(unknown.err).toMatch(/--instructions: no instructions named "nobody"/);
  });
});

describe('esopt train --config', () => {
  it('refuses a task suite or instructions the store does not hold, naming the field, before anything runs', async () => {
    const empty = join(dir, 'empty-store');
    const base = { environment: { name: 'sudoku', options: {} }, model: { preset: 'tiny' }, es: { population: 2, sigma: 0.02, alpha: 0.01 }, iterations: 1 };
    const suiteFile = join(dir, 'suite.json');
    writeFileSync(suiteFile, JSON.stringify({ ...base, tasks: { suite: 'nobody' } }));
    const suite = await run(['train', '--config', suiteFile, '--store', empty]);
    expect(suite.code).toBe(2);
    expect(suite.err).toMatch(/--config: tasks\.suite\.name: no task suite named "nobody"/);
    const instructionsFile = join(dir, 'instructions.json');
    writeFileSync(instructionsFile, JSON.stringify({ ...base, instructions: 'nobody' }));
    const instructions = await run(['train', '--config', instructionsFile, '--store', empty]);
    expect(instructions.code).toBe(2);
    expect(instructions.err).toMatch(/--config: instructions\.name: no instructions named "nobody"/);
    expect(await new FsObjectStore(empty).list('runs/')).toEqual([]);
  });
});
