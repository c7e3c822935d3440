/**
 * The heuristic sandbox (isolated-vm): escape attempts, runaway code and bad results are all contained —
 * each becomes a SandboxError with its reason — and the host process is unaffected.
 */
import { describe, expect, it } from 'vitest';
import { Sandbox, SandboxError } from '../../environments/heuristic/sandbox.ts';

const LIMITS = { memoryMb: 32, perCallMs: 200, totalMs: 2_000 };

async function run(code: string, args: unknown[] = [10, [20, 30]], limits = LIMITS): Promise<unknown> {
  const sandbox = await Sandbox.create(code, 'priority', limits);
  try {
    return await sandbox.call(args);
  } finally {
    sandbox.dispose();
  }
}

async function failure(code: string, limits = LIMITS): Promise<SandboxError> {
  try {
    await run(code, undefined, limits);
  } catch (err) {
    if (err instanceof SandboxError) return err;
    throw err;
  }
  throw new Error('expected the submission to fail');
}

describe('heuristic sandbox', () => {
  it('runs a plain function on copies of its arguments and returns plain data', async () => {
    expect(await run('function priority(item, bins) { return bins.map((b) => b - item); }')).toEqual([10, 20]);
    expect(await run('const priority = (item, bins) => bins.length;')).toBe(2);
  });

  it.each([
    ['require', 'function priority() { return require("fs").readFileSync("/etc/passwd", "utf8"); }', /require is not defined/],
    ['process', 'function priority() { return process.pid; }', /process is not defined/],
    ['constructor chain', 'function priority() { return this.constructor.constructor("return process")().pid; }', /process is not defined/],
    ['Function from a literal', 'function priority() { return (() => {}).constructor("return globalThis")().process.env; }', /Cannot read properties of undefined/],
    ['timers', 'function priority() { setTimeout(() => {}, 0); return 1; }', /setTimeout is not defined/],
    ['network', 'function priority() { return fetch("http://93.184.216.34/"); }', /fetch is not defined/],
    ['host module objects', 'function priority() { return module.exports; }', /module is not defined/],
  ])('blocks %s', async (_name, code, reason) => {
    const err = await failure(code);
    expect(err.kind).toBe('exception');
    expect(err.message).toMatch(reason);
  });

  it('sees only the ECMAScript built-ins on globalThis (no host globals, no WebAssembly, no shared memory)', async () => {
    const names = (await run('function priority() { return Object.getOwnPropertyNames(globalThis); }')) as string[];
    for (const host of ['process', 'require', 'Buffer', 'fetch', 'setTimeout', 'setInterval', 'queueMicrotask', 'WebAssembly', 'SharedArrayBuffer', 'Atomics', 'global']) {
      expect(names).not.toContain(host);
    }
    expect(names).toContain('Math');
  });

  it('refuses a dynamic import (the isolate has no module loader)', async () => {
    const err = await failure('function priority() { return import("node:fs"); }');
    expect(err.kind).toBe('exception');
    expect(err.message).toMatch(/Not supported/);
  });

  it('stops an infinite loop in a call and in the top-level code', async () => {
    expect((await failure('function priority() { for (;;) {} }')).kind).toBe('timeout');
    const top = await failure('while (true) {}\nfunction priority() { return 1; }');
    expect(top.kind).toBe('timeout');
    expect(top.message).toMatch(/top-level code/);
  });

  it('stops a memory blow-up at the isolate limit without touching the host heap', async () => {
    const before = process.memoryUsage().heapUsed;
    // A generous time limit, so that on a busy machine the memory limit is what stops it.
    const err = await failure('function priority() { const hog = []; for (;;) hog.push(new Array(100000).fill(Math.random())); }', { ...LIMITS, perCallMs: 20_000, totalMs: 20_000 });
    expect(err.kind).toBe('memory');
    expect(err.message).toMatch(/32 MB/);
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(32 * 1024 * 1024);
  });

  it('reports syntax errors, a missing function and non-cloneable results', async () => {
    expect((await failure('function priority( {')).kind).toBe('syntax');
    expect((await failure('function other() { return 1; }')).kind).toBe('missing-function');
    expect((await failure('async function priority() { return 1; }')).kind).toBe('return-type');
    expect((await failure('function priority() { return () => 1; }')).kind).toBe('return-type');
  });

  it('enforces the total time budget across calls', async () => {
    const sandbox = await Sandbox.create('function priority() { const t = Date.now(); while (Date.now() - t < 40) {} return 1; }', 'priority', {
      memoryMb: 32,
      perCallMs: 100,
      totalMs: 150,
    });
    try {
      let calls = 0;
      const err = await (async () => {
        for (;;) {
          try {
            await sandbox.call([]);
            calls++;
          } catch (e) {
            return e as SandboxError;
          }
        }
      })();
      expect(err.kind).toBe('budget');
      expect(calls).toBeGreaterThanOrEqual(2);
      expect(calls).toBeLessThanOrEqual(4);
    } finally {
      sandbox.dispose();
    }
  });

  it.each([
    ['a getter on a thrown object', 'throw { get message() { for (;;) {} } };\nfunction priority() { return 1; }', 'timeout'],
    ['a getter on the result', 'function priority() { return { get x() { for (;;) {} } }; }', 'timeout'],
    ['a looping toJSON on the result', 'function priority() { return { toJSON() { for (;;) {} } }; }', 'timeout'],
    ['a Proxy result', 'function priority() { return new Proxy([1, 2], { get() { for (;;) {} } }); }', 'timeout'],
    ['a thrown Proxy', 'function priority() { throw new Proxy({}, { getPrototypeOf() { for (;;) {} } }); }', 'timeout'],
    ['a thrown object with a harmless getter', 'function priority() { throw { get message() { return "x"; } }; }', 'exception'],
  ])('contains code planted to run while a value leaves the isolate: %s', async (_name, code, kind) => {
    const started = performance.now();
    expect((await failure(code)).kind).toBe(kind);
    expect(performance.now() - started).toBeLessThan(10_000);
  });

  it('passes non-finite numbers through', async () => {
    expect(await run('function priority() { return [Infinity, -Infinity, 1.5]; }')).toEqual([Infinity, -Infinity, 1.5]);
    expect(await run('function priority() { return [NaN]; }')).toEqual([Number.NaN]);
  });

  it('keeps the host usable after a contained failure', async () => {
    await failure('function priority() { for (;;) {} }');
    expect(await run('function priority(item) { return item * 2; }', [21])).toBe(42);
  });
});
