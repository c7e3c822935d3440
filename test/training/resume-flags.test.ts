/**
 * `esopt train --resume RUN` with --iterations and the --max-* flags: the stored config is updated and the
 * run goes on from its checkpoint to the θ of a run that long from the start; bad values are usage errors
 * naming the flag and the field, and leave the stored config as it was.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { keys } from '../../shared/keys.ts';
import { trainCommand } from '../../trainer/cli/commands/train.ts';
import { baseConfig, esopt } from './helpers/killable-run.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-resume-flags-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const store = join(root, 'store');

// σ and α that do not depend on the run's length: a run extended from 2 to 4 iterations is the run of 4.
const config = (iterations: number) => ({ ...baseConfig, es: { population: 4, sigma: 0.05, alpha: { schedule: 'step', initial: 0.05, factor: 0.5, every: 2 } }, tasks: { seed: 3, trainPerIteration: 1, evalCount: 1 }, iterations, evalInterval: 100 });
const write = (name: string, c: object) => {
  const path = join(root, `${name}.json`);
  writeFileSync(path, JSON.stringify(c));
  return path;
};
const lastJson = (out: { stdout: string }) => JSON.parse(out.stdout.trim().split('\n').at(-1)!);
const io = { stdout: () => {}, stderr: () => {}, readStdin: async () => '' };
const storedConfig = (run: string) => JSON.parse(readFileSync(join(store, keys.config(run)), 'utf8'));

describe('esopt train --resume with --iterations and --max-*', () => {
  it('extends a finished run to the θ of a run that long from the start, and refuses bad values by flag and field', async () => {
    const [long, short] = await Promise.all([
      esopt(['train', '--config', write('long', config(4)), '--run', 'long', '--store', store, '--json']),
      esopt(['train', '--config', write('short', config(2)), '--run', 'short', '--store', store, '--json']),
    ]);
    expect(long.code, long.stderr).toBe(0);
    expect(short.code, short.stderr).toBe(0);

    // refusals in this process: each is a usage error before anything trains
    const refused = (argv: string[]) => trainCommand([...argv, '--store', store], io).then(() => 'ran', (err: Error) => `${err.name}: ${err.message}`);
    expect(await refused(['--resume', 'short', '--iterations', '1'])).toBe('UsageError: --resume short: iterations (--iterations): is 1, below the 2 iterations the run has completed');
    expect(await refused(['--resume', 'short', '--max-cost-usd=-1', '--max-episodes', '2.5'])).toMatch(/^UsageError: --resume short: budget\.maxCostUsd \(--max-cost-usd\): .*; budget\.maxEpisodes \(--max-episodes\): /);
    expect(await refused(['--resume', 'short', '--max-hours', 'lots'])).toBe('UsageError: --max-hours: is not a number (got "lots")');
    expect(await refused(['--config', write('other', config(2)), '--max-episodes', '5'])).toMatch(/^UsageError: --iterations and the --max-\* flags are for --resume RUN/);
    expect(storedConfig('short')).toMatchObject({ iterations: 2, budget: {} });

    const text = await esopt(['train', '--resume', 'short', '--iterations', '4', '--max-cost-usd', '5', '--store', store]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain('run short: iterations 2 → 4, budget.maxCostUsd none → 5 (its stored config)');
    expect(storedConfig('short')).toMatchObject({ iterations: 4, budget: { maxCostUsd: 5 } });
    const theta = (out: string) => /θ ([0-9a-f]+)/.exec(out)?.[1];
    expect(theta(text.stdout)).toBe(lastJson(long).thetaHash);
    expect(lastJson(long).thetaHash).not.toBe(lastJson(short).thetaHash);
  }, 60_000);
});
