/**
 * The suite shares module caches between files (vitest.config.ts, `isolate: false`), so a file that mocks a
 * module with `vi.mock` would hand its mock to the files after it in the same worker. Every such file must be
 * listed in MOCKING, which runs isolated.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { MOCKING } from '../vitest.config.ts';

it('runs every file that calls vi.mock isolated, and lists no file that does not', () => {
  const files = (readdirSync('test', { recursive: true }) as string[]).filter((f) => f.endsWith('.test.ts')).map((f) => join('test', f));
  const mocking = files.filter((f) => /\bvi\.(mock|doMock)\(/.test(readFileSync(f, 'utf8')) && f !== join('test', 'test-isolation.test.ts'));
  expect(mocking.sort()).toEqual([...MOCKING].sort());
});
