/**
 * One Lambda execution environment on this machine: AWS's runtime interface client (aws-lambda-ric) running
 * a function's code directory, behind its own Runtime API, with Lambda's limits. As root:
 * - memory: a cgroup v1 memory group with the function's memory as its limit (swap included), so past
 *   it the kernel kills the runtime, as Lambda does (Runtime.OutOfMemory); its peak usage is read per invocation;
 * - a private mount namespace with the code bind-mounted read-only at /var/task and /tmp a fresh ext4
 *   volume of the configured ephemeral storage (a loop device: its pages are reclaimable cache, not
 *   memory, as Lambda's /tmp is disk);
 * - only the variables Lambda sets plus the function's own (its NODE_OPTIONS included), cwd /var/task;
 * - the timeout per invocation: past it the environment is killed and the invocation fails as
 *   `Task timed out after N seconds`.
 * An environment that died (killed, timed out, crashed) serves nothing more; the pool starts another.
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, readFileSync, rmdirSync, statfsSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { startRuntimeApi, type RuntimeApi, type RuntimeOutcome } from './runtime-api.ts';
import { runtimeClientDir } from './runtime-client.ts';

const MEMORY_CGROUP_ROOT = '/sys/fs/cgroup/memory';
const TASK_ROOT = '/var/task';
/** Where Lambda keeps its runtime and Node; bound there so they stay visible whatever /tmp hides (a checkout under /tmp). */
const RUNTIME_DIR = '/var/runtime';
const LANG_NODE = '/var/lang/bin/node';

export interface EnvironmentSpec {
  /** The function's name (AWS_LAMBDA_FUNCTION_NAME). */
  name: string;
  codeDir: string;
  /** `bundle.handler`. */
  handler: string;
  memoryMb: number;
  ephemeralStorageMb: number;
  timeoutS: number;
  /** The function's own variables, as configured. */
  environment: Record<string, string>;
  region: string;
  /** Where this environment keeps its /tmp volume and log. */
  workDir: string;
}

export interface InvocationOutcome {
  ok: boolean;
  /** The handler's result (JSON text) when ok. */
  payload: string | null;
  errorType: string | null;
  errorMessage: string | null;
  /** The memory group's peak during the invocation (what the limit is held against). */
  peakMemoryMb: number;
  /** /tmp used when the invocation ended. */
  tmpUsedMb: number;
  durationMs: number;
  coldStart: boolean;
}

/** What this machine must give for the limits; a clear error names the first thing missing. */
export function checkLimitsAvailable(): void {
  if (process.getuid?.() !== 0) throw new Error('the rehearsal needs root: a cgroup v1 memory group and a mount namespace per Lambda environment');
  if (!existsSync(join(MEMORY_CGROUP_ROOT, 'memory.limit_in_bytes'))) throw new Error(`no cgroup v1 memory controller at ${MEMORY_CGROUP_ROOT}: the Lambda memory limit cannot be applied`);
  if (!existsSync('/dev/loop-control')) throw new Error('no loop devices (/dev/loop-control): the /tmp volume cannot be made');
  for (const tool of ['unshare', 'mount', 'mkfs.ext4']) {
    try {
      execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' });
    } catch {
      throw new Error(`${tool} is not on PATH (util-linux / e2fsprogs)`);
    }
  }
}

let serial = 0;

export class ExecutionEnvironment {
  private warm = false;
  private dead: string | null = null;
  private constructor(
    readonly id: string,
    private readonly spec: EnvironmentSpec,
    private readonly child: ChildProcess,
    private readonly api: RuntimeApi,
    private readonly cgroup: string,
    private readonly exited: Promise<string>,
  ) {}

  static async start(spec: EnvironmentSpec): Promise<ExecutionEnvironment> {
    // The runtime interface client's package from its cache outside the checkout (installed on first use:
    // runtime-client.ts), never from the function's code.
    const ricDir = await runtimeClientDir();
    const id = `${spec.name}-${process.pid}-${++serial}`;
    const dir = join(spec.workDir, id);
    mkdirSync(dir, { recursive: true });
    const api = await startRuntimeApi(`arn:aws:lambda:${spec.region}:000000000000:function:${spec.name}`);
    const cgroup = join(MEMORY_CGROUP_ROOT, 'esopt-rehearsal', id);
    mkdirSync(cgroup, { recursive: true });
    const bytes = String(spec.memoryMb * 1024 * 1024);
    writeFileSync(join(cgroup, 'memory.limit_in_bytes'), bytes);
    if (existsSync(join(cgroup, 'memory.memsw.limit_in_bytes'))) writeFileSync(join(cgroup, 'memory.memsw.limit_in_bytes'), bytes);
    // /tmp: a sparse image formatted without reserved blocks or journal, so the function sees about its configured size.
    const image = join(dir, 'tmp.img');
    execFileSync('truncate', ['-s', `${spec.ephemeralStorageMb}M`, image]);
    execFileSync('mkfs.ext4', ['-q', '-F', '-m', '0', '-O', '^has_journal', image]);
    for (const dir of [TASK_ROOT, RUNTIME_DIR, dirname(LANG_NODE)]) mkdirSync(dir, { recursive: true });
    if (!existsSync(LANG_NODE)) writeFileSync(LANG_NODE, '');
    const node = process.execPath;
    const env: Record<string, string> = {
      // What Lambda's nodejs runtime sets (docs: "Defined runtime environment variables").
      AWS_LAMBDA_FUNCTION_NAME: spec.name,
      AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(spec.memoryMb),
      AWS_LAMBDA_FUNCTION_VERSION: '$LATEST',
      AWS_LAMBDA_LOG_GROUP_NAME: `/aws/lambda/${spec.name}`,
      AWS_LAMBDA_LOG_STREAM_NAME: id,
      AWS_LAMBDA_INITIALIZATION_TYPE: 'on-demand',
      AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs22.x',
      AWS_REGION: spec.region,
      AWS_DEFAULT_REGION: spec.region,
      AWS_LAMBDA_RUNTIME_API: api.address,
      LAMBDA_TASK_ROOT: TASK_ROOT,
      LAMBDA_RUNTIME_DIR: RUNTIME_DIR,
      _HANDLER: spec.handler,
      TZ: ':UTC',
      LANG: 'en_US.UTF-8',
      PATH: `${dirname(LANG_NODE)}:/usr/local/bin:/usr/bin:/bin`,
      ...spec.environment,
    };
    const script = [
      'set -e',
      `echo $$ > ${cgroup}/cgroup.procs`,
      `mount --bind "$ESOPT_CODE_DIR" ${TASK_ROOT}`,
      `mount -o remount,bind,ro ${TASK_ROOT}`,
      `mount --bind "$ESOPT_RIC_DIR" ${RUNTIME_DIR}`,
      `mount -o remount,bind,ro ${RUNTIME_DIR}`,
      `mount --bind "$ESOPT_NODE" ${LANG_NODE}`,
      `mount -o loop "$ESOPT_TMP_IMAGE" /tmp`,
      'chmod 1777 /tmp',
      `cd ${TASK_ROOT}`,
      'unset ESOPT_CODE_DIR ESOPT_TMP_IMAGE ESOPT_RIC_DIR ESOPT_NODE',
      `exec ${LANG_NODE} ${RUNTIME_DIR}/bin/index.mjs "$_HANDLER"`,
    ].join('\n');
    const child = spawn('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', script], {
      env: { ...env, ESOPT_CODE_DIR: spec.codeDir, ESOPT_TMP_IMAGE: image, ESOPT_RIC_DIR: ricDir, ESOPT_NODE: node },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    // The function's log (CloudWatch's place).
    const log = createWriteStream(join(dir, 'function.log'));
    child.stdout!.pipe(log, { end: false });
    child.stderr!.pipe(log, { end: false });
    const exited = new Promise<string>((resolve) =>
      child.once('exit', (code, signal) => {
        log.end();
        resolve(signal ? `signal: ${signal === 'SIGKILL' ? 'killed' : signal}` : `exit status ${code}`);
      }),
    );
    return new ExecutionEnvironment(id, spec, child, api, cgroup, exited);
  }

  get alive(): boolean {
    return this.dead === null;
  }

  private readMb(file: string): number {
    return Math.round(Number(readFileSync(join(this.cgroup, file), 'utf8')) / (1024 * 1024));
  }

  private tmpUsedMb(): number {
    try {
      // The runtime's own view of /tmp, through its mount namespace.
      const s = statfsSync(`/proc/${this.child.pid}/root/tmp`);
      return Math.round(((s.blocks - s.bfree) * s.bsize) / (1024 * 1024));
    } catch {
      return 0;
    }
  }

  async invoke(event: unknown): Promise<InvocationOutcome> {
    if (this.dead) throw new Error(`environment ${this.id} is dead (${this.dead})`);
    const coldStart = !this.warm;
    this.warm = true;
    writeFileSync(join(this.cgroup, 'memory.max_usage_in_bytes'), '0');
    const started = performance.now();
    const timeoutMs = this.spec.timeoutS * 1000;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<RuntimeOutcome | 'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
    const outcome = await Promise.race([
      this.api.invoke(event, Date.now() + timeoutMs),
      this.api.initError,
      this.exited.then((why) => ({ kind: 'exit' as const, why })),
      timedOut,
    ]);
    clearTimeout(timer);
    const durationMs = performance.now() - started;
    const peakMemoryMb = this.readMb('memory.max_usage_in_bytes');
    const tmpUsedMb = this.tmpUsedMb();
    const base = { peakMemoryMb, tmpUsedMb, durationMs, coldStart };
    if (outcome === 'timeout') {
      await this.kill('timed out');
      return { ok: false, payload: null, errorType: 'Sandbox.Timedout', errorMessage: `Task timed out after ${this.spec.timeoutS.toFixed(2)} seconds`, ...base };
    }
    if (outcome.kind === 'exit') {
      this.dead = outcome.why;
      // Lambda names a kill by the memory limit Runtime.OutOfMemory; the group's OOM-kill counter tells it apart.
      const oomKilled = /^oom_kill [1-9]/m.test(readFileSync(join(this.cgroup, 'memory.oom_control'), 'utf8'));
      await this.cleanup();
      return { ok: false, payload: null, errorType: oomKilled ? 'Runtime.OutOfMemory' : 'Runtime.ExitError', errorMessage: `Runtime exited with error: ${outcome.why}`, ...base };
    }
    if (outcome.kind === 'init-error') {
      await this.kill('init error');
      return { ok: false, payload: null, errorType: outcome.errorType, errorMessage: outcome.errorMessage, ...base };
    }
    if (outcome.kind === 'error') return { ok: false, payload: outcome.body, errorType: outcome.errorType, errorMessage: outcome.errorMessage, ...base };
    return { ok: true, payload: outcome.body, errorType: null, errorMessage: null, ...base };
  }

  private async kill(why: string): Promise<void> {
    this.dead ??= why;
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
    // Children the runtime started (a browser) are in the memory group: kill them too.
    try {
      for (const pid of readFileSync(join(this.cgroup, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)) process.kill(Number(pid), 'SIGKILL');
    } catch {
      // Already gone.
    }
    await this.exited;
    await this.cleanup();
  }

  private async cleanup(): Promise<void> {
    await this.api.close();
    for (let attempt = 0; attempt < 50; attempt++) {
      try {
        for (const pid of readFileSync(join(this.cgroup, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)) process.kill(Number(pid), 'SIGKILL');
        rmdirSync(this.cgroup);
        return;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  async close(): Promise<void> {
    if (!this.dead) await this.kill('closed');
  }
}
