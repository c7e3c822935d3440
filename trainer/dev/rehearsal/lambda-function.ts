/**
 * A rehearsed Lambda function: execution environments started on demand up to `maxEnvironments`, each
 * serving one invocation at a time and kept warm for the next, replaced when one dies; invocations past
 * that many wait their turn (Lambda would start more, up to the reserved concurrency: this machine has
 * two cores). Every invocation is recorded with its peak memory and /tmp for sizing the function.
 */
import { checkLimitsAvailable, ExecutionEnvironment, type EnvironmentSpec, type InvocationOutcome } from './execution-environment.ts';
import { runtimeClientDir } from './runtime-client.ts';

export interface LambdaFunctionOptions extends Omit<EnvironmentSpec, 'region'> {
  region?: string;
  maxEnvironments?: number;
}

export interface InvocationRecord extends InvocationOutcome {
  event: unknown;
  environment: string;
}

/** A function's error as the Invoke API reports it (X-Amz-Function-Error). */
export class FunctionError extends Error {
  constructor(
    readonly errorType: string,
    message: string,
  ) {
    super(message);
    this.name = errorType;
  }
}

export interface LambdaFunction {
  name: string;
  invoke(event: unknown): Promise<InvocationOutcome>;
  /** The handler's parsed result; a function error is thrown as a FunctionError. */
  invokeOrThrow(event: unknown): Promise<unknown>;
  readonly invocations: InvocationRecord[];
  /** Environments started so far (cold starts). */
  readonly started: number;
  /** Shuts the idle environments down, as Lambda does after a while: the next invocations start cold. */
  recycle(): Promise<void>;
  close(): Promise<void>;
}

export async function startLambdaFunction(o: LambdaFunctionOptions): Promise<LambdaFunction> {
  checkLimitsAvailable();
  // The runtime client, installed now on first use rather than inside the first invocation.
  await runtimeClientDir();
  const spec: EnvironmentSpec = { ...o, region: o.region ?? o.environment.AWS_REGION ?? 'us-east-1' };
  const max = o.maxEnvironments ?? 4;
  const idle: ExecutionEnvironment[] = [];
  const all = new Set<ExecutionEnvironment>();
  const waiting: Array<() => void> = [];
  const invocations: InvocationRecord[] = [];
  let started = 0;
  let closed = false;

  const acquire = async (): Promise<ExecutionEnvironment> => {
    for (;;) {
      if (closed) throw new Error(`function ${o.name} is closed`);
      const warm = idle.pop();
      if (warm) return warm;
      if (all.size < max) {
        const env = await ExecutionEnvironment.start(spec);
        started++;
        all.add(env);
        return env;
      }
      await new Promise<void>((resolve) => waiting.push(resolve));
    }
  };
  const release = async (env: ExecutionEnvironment) => {
    if (env.alive && !closed) idle.push(env);
    else {
      all.delete(env);
      await env.close();
    }
    waiting.shift()?.();
  };

  const invoke = async (event: unknown): Promise<InvocationOutcome> => {
    const env = await acquire();
    try {
      const outcome = await env.invoke(event);
      invocations.push({ ...outcome, event, environment: env.id });
      return outcome;
    } finally {
      await release(env);
    }
  };

  return {
    name: o.name,
    invoke,
    async invokeOrThrow(event) {
      const outcome = await invoke(event);
      if (!outcome.ok) throw new FunctionError(outcome.errorType ?? 'Unknown', outcome.errorMessage ?? '');
      return JSON.parse(outcome.payload ?? 'null');
    },
    invocations,
    get started() {
      return started;
    },
    async recycle() {
      const shut = idle.splice(0);
      for (const env of shut) all.delete(env);
      await Promise.all(shut.map((e) => e.close()));
    },
    async close() {
      closed = true;
      waiting.splice(0).forEach((w) => w());
      await Promise.all([...all].map((e) => e.close()));
      all.clear();
    },
  };
}
