/**
 * Runs one submitted JavaScript function in isolated-vm: a separate V8 isolate with its own heap (and a
 * memory limit), no require/import/process/fs/network/timers and none of the host's globals — the
 * context holds only the ECMAScript built-ins. Every call copies its arguments in and its result out,
 * so no reference to a host object ever crosses the boundary. Time is bounded per call and in total.
 */
import type ivm from 'isolated-vm';

/** Loaded on first use: a process that only validates configs (the Api function) never loads the native module. */
type IsolatedVm = typeof ivm;
let isolatedVm: Promise<IsolatedVm> | undefined;
const loadIsolatedVm = () => (isolatedVm ??= import('isolated-vm').then((m) => m.default));

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

/**
 * Trusted code, run before the submission so it holds the original built-ins: it calls the agent's
 * function and turns the outcome into one string inside the isolate, under the call's timeout. So
 * nothing the agent controls (a getter on the result or on a thrown object, a Proxy, toJSON) ever runs
 * while isolated-vm copies a value out, where no timeout applies. Non-finite numbers survive as tags.
 */
const CALLER = `(function () {
  var stringify = JSON.stringify, toText = String, apply = Reflect.apply, isFiniteNumber = Number.isFinite;
  function replacer(key, value) {
    if (typeof value === 'number' && !isFiniteNumber(value)) return value !== value ? '\u0000NaN' : value > 0 ? '\u0000Inf' : '\u0000-Inf';
    return value;
  }
  return function bind(fn) {
    return function call(args) {
      var result;
      try {
        result = apply(fn, undefined, args);
      } catch (e) {
        var message;
        try { message = toText(e instanceof Error ? e.message : e); } catch (_) { message = 'an exception that cannot be described'; }
        return 'throw:' + message;
      }
      var type = typeof result;
      if (type === 'function' || type === 'symbol' || type === 'bigint' || type === 'undefined') return 'type:' + (type === 'undefined' ? 'undefined' : 'a ' + type);
      if (result !== null && type === 'object' && typeof result.then === 'function') return 'type:a promise';
      var json;
      try { json = stringify(result, replacer); } catch (e) { return 'type:a value that cannot be serialised as JSON'; }
      return 'ok:' + json;
    };
  };
})()`;

function revive(_key: string, value: unknown): unknown {
  if (value === '\u0000NaN') return Number.NaN;
  if (value === '\u0000Inf') return Number.POSITIVE_INFINITY;
  if (value === '\u0000-Inf') return Number.NEGATIVE_INFINITY;
  return value;
}

/** Slack on top of isolated-vm's own timeout before the watchdog gives up on the isolate. */
const WATCHDOG_GRACE_MS = 500;
const killedByWatchdog = new WeakSet<ivm.Isolate>();

/**
 * isolated-vm's `timeout` does not cover everything (code the agent planted can run while a thrown
 * value is converted); a host-side watchdog disposes the isolate if an operation outlives its limit.
 */
async function guarded<T>(isolate: ivm.Isolate, operation: Promise<T>, limitMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const watchdog = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      killedByWatchdog.add(isolate);
      if (!isolate.isDisposed) isolate.dispose();
      reject(new SandboxError('timeout', `${what} ran longer than ${limitMs} ms`));
    }, limitMs + WATCHDOG_GRACE_MS);
  });
  try {
    return await Promise.race([operation, watchdog]);
  } finally {
    clearTimeout(timer);
  }
}

export class Sandbox {
  private usedMs = 0;

  private constructor(
    private readonly vm: IsolatedVm,
    private readonly isolate: ivm.Isolate,
    private readonly caller: ivm.Reference<unknown>,
    private readonly limits: SandboxLimits,
    private readonly functionName: string,
  ) {}

  /** Compiles and runs `code`, then looks up `functionName` (a function declaration or a top-level const). */
  static async create(code: string, functionName: string, limits: SandboxLimits): Promise<Sandbox> {
    const ivm = await loadIsolatedVm();
    const isolate = new ivm.Isolate({ memoryLimit: limits.memoryMb });
    const top = 'the top-level code';
    try {
      const context = await isolate.createContext();
      await context.eval(HARDENING, { timeout: limits.perCallMs });
      const bind = (await context.eval(CALLER, { reference: true, timeout: limits.perCallMs })) as ivm.Reference<unknown>;
      let script: ivm.Script;
      try {
        script = await isolate.compileScript(code, { filename: 'submission.js' });
      } catch (err) {
        throw new SandboxError('syntax', `syntax error: ${messageOf(err)}`);
      }
      const started = performance.now();
      await guarded(isolate, script.run(context, { timeout: limits.perCallMs }), limits.perCallMs, top);
      // A second script sees the first one's top-level `const`/`let` bindings as well as its functions.
      const lookup = await isolate.compileScript(`typeof ${functionName} === 'function' ? ${functionName} : undefined`);
      const fn = (await guarded(isolate, lookup.run(context, { reference: true, timeout: limits.perCallMs }), limits.perCallMs, top)) as ivm.Reference<unknown>;
      if (fn.typeof !== 'function') throw new SandboxError('missing-function', `the code does not define a function named ${functionName}`);
      const caller = (await bind.apply(undefined, [fn.derefInto()], { result: { reference: true }, timeout: limits.perCallMs })) as ivm.Reference<unknown>;
      const sandbox = new Sandbox(ivm, isolate, caller, limits, functionName);
      sandbox.usedMs = performance.now() - started;
      return sandbox;
    } catch (err) {
      const error = err instanceof SandboxError ? err : classify(err, isolate, top, limits);
      if (!isolate.isDisposed) isolate.dispose();
      throw error;
    }
  }

  /** Calls the function with copies of `args`; returns its result as plain JSON data. */
  async call(args: unknown[]): Promise<unknown> {
    const left = this.limits.totalMs - this.usedMs;
    const what = `${this.functionName}()`;
    if (left <= 0) throw new SandboxError('budget', `the time budget of ${this.limits.totalMs} ms for all calls is spent`);
    const timeout = Math.max(1, Math.ceil(Math.min(this.limits.perCallMs, left)));
    const started = performance.now();
    let outcome: unknown;
    try {
      outcome = await guarded(
        this.isolate,
        this.caller.apply(undefined, [new this.vm.ExternalCopy(args).copyInto()], { result: { copy: true }, timeout }),
        timeout,
        what,
      );
    } catch (err) {
      throw err instanceof SandboxError ? err : classify(err, this.isolate, what, this.limits, timeout < this.limits.perCallMs);
    } finally {
      this.usedMs += performance.now() - started;
    }
    const text = String(outcome);
    if (text.startsWith('ok:')) return JSON.parse(text.slice(3), revive) as unknown;
    if (text.startsWith('throw:')) throw new SandboxError('exception', `${what} threw: ${text.slice(6, 506)}`);
    throw new SandboxError('return-type', `${what} returned ${text.slice(5, 200)}, not plain data`);
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
  if (killedByWatchdog.has(isolate)) return new SandboxError('timeout', `${what} ran longer than ${limits.perCallMs} ms`);
  if (isolate.isDisposed || /memory limit/i.test(message)) {
    return new SandboxError('memory', `${what} exceeded the memory limit of ${limits.memoryMb} MB`);
  }
  if (/timed out/i.test(message)) {
    return budgetBound
      ? new SandboxError('budget', `${what} ran past the time budget of ${limits.totalMs} ms for all calls`)
      : new SandboxError('timeout', `${what} ran longer than ${limits.perCallMs} ms`);
  }
  return new SandboxError('exception', `${what} threw: ${message.slice(0, 500)}`);
}
