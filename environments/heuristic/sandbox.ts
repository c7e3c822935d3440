/**
 * Runs one submitted JavaScript function in isolated-vm: a separate V8 isolate with its own heap (and a
 * memory limit), no require/import/process/fs/network/timers and none of the host's globals — the
 * context holds only the ECMAScript built-ins. Every call copies its arguments in and its result out,
 * so no reference to a host object ever crosses the boundary. Time is bounded per call and in total.
 */
import ivm from 'isolated-vm';

export interface SandboxLimits {
  /** Heap limit of the isolate in MB (isolated-vm's minimum is 8). */
  memoryMb: number;
  /** Longest one call (or the top-level code) may run. */
  perCallMs: number;
  /** Time budget of all calls of this submission together. */
  totalMs: number;
}

/** A submission failed: the message is shown to the agent and recorded in the transcript. */
export class SandboxError extends Error {
  constructor(
    readonly kind: 'syntax' | 'exception' | 'timeout' | 'memory' | 'missing-function' | 'return-type' | 'budget',
    message: string,
  ) {
    super(message);
  }
}

/**
 * Built-ins removed before the submission runs: WebAssembly and shared memory are not needed for a
 * heuristic and are the usual way around heap accounting and time limits (Atomics.wait).
 */
const HARDENING = `
delete globalThis.WebAssembly;
delete globalThis.SharedArrayBuffer;
delete globalThis.Atomics;
`;

export class Sandbox {
  private usedMs = 0;

  private constructor(
    private readonly isolate: ivm.Isolate,
    private readonly fn: ivm.Reference<unknown>,
    private readonly limits: SandboxLimits,
    private readonly functionName: string,
  ) {}

  /** Compiles and runs `code`, then looks up `functionName` (a function declaration or a top-level const). */
  static async create(code: string, functionName: string, limits: SandboxLimits): Promise<Sandbox> {
    const isolate = new ivm.Isolate({ memoryLimit: limits.memoryMb });
    try {
      const context = await isolate.createContext();
      await context.eval(HARDENING, { timeout: limits.perCallMs });
      let script: ivm.Script;
      try {
        script = await isolate.compileScript(code, { filename: 'submission.js' });
      } catch (err) {
        throw new SandboxError('syntax', `syntax error: ${messageOf(err)}`);
      }
      const started = performance.now();
      try {
        await script.run(context, { timeout: limits.perCallMs });
      } catch (err) {
        throw classify(err, isolate, 'the top-level code', limits);
      }
      // A second script sees the first one's top-level `const`/`let` bindings as well as its functions.
      const lookup = await isolate.compileScript(`typeof ${functionName} === 'function' ? ${functionName} : undefined`);
      const fn = (await lookup.run(context, { reference: true, timeout: limits.perCallMs })) as ivm.Reference<unknown>;
      if (fn.typeof !== 'function') throw new SandboxError('missing-function', `the code does not define a function named ${functionName}`);
      const sandbox = new Sandbox(isolate, fn, limits, functionName);
      sandbox.usedMs = performance.now() - started;
      return sandbox;
    } catch (err) {
      if (!isolate.isDisposed) isolate.dispose();
      if (err instanceof SandboxError) throw err;
      throw classify(err, isolate, 'the top-level code', limits);
    }
  }

  /** Calls the function with copies of `args`; returns a copy of its result (a plain value). */
  async call(args: unknown[]): Promise<unknown> {
    const left = this.limits.totalMs - this.usedMs;
    if (left <= 0) throw new SandboxError('budget', `the time budget of ${this.limits.totalMs} ms for all calls is spent`);
    const timeout = Math.max(1, Math.ceil(Math.min(this.limits.perCallMs, left)));
    const started = performance.now();
    try {
      return await this.fn.apply(undefined, args, { arguments: { copy: true }, result: { copy: true }, timeout });
    } catch (err) {
      throw classify(err, this.isolate, `${this.functionName}()`, this.limits, timeout < this.limits.perCallMs);
    } finally {
      this.usedMs += performance.now() - started;
    }
  }

  get elapsedMs(): number {
    return this.usedMs;
  }

  dispose(): void {
    if (!this.isolate.isDisposed) this.isolate.dispose();
  }
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function classify(err: unknown, isolate: ivm.Isolate, what: string, limits: SandboxLimits, budgetBound = false): SandboxError {
  const message = messageOf(err);
  if (isolate.isDisposed || /memory limit/i.test(message)) {
    return new SandboxError('memory', `${what} exceeded the memory limit of ${limits.memoryMb} MB`);
  }
  if (/timed out/i.test(message)) {
    return budgetBound
      ? new SandboxError('budget', `${what} ran past the time budget of ${limits.totalMs} ms for all calls`)
      : new SandboxError('timeout', `${what} ran longer than ${limits.perCallMs} ms`);
  }
  if (/could not be cloned|#<Promise>|non-transferable/i.test(message)) {
    return new SandboxError('return-type', `${what} returned a value that is not plain data (${message})`);
  }
  return new SandboxError('exception', `${what} threw: ${message.slice(0, 500)}`);
}
