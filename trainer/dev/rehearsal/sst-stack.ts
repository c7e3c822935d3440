/**
 * sst.config.ts evaluated offline: `sst install` needs the network, so the SST and Pulumi globals are
 * replaced by recorders ($config, $app, $interpolate, $jsonStringify, sst.*, aws.*) and `evaluate`
 * returns what the file declared: resources with their arguments, and the outputs. Deploy-time values
 * (ARNs, IPs) appear as `${Type.Name.prop}` placeholders. `stackFunctions` reads each `sst.aws.Function`
 * from it as the deploy would build and configure it (the rehearsal's input: sst-build.ts and the runner).
 * Importing this module defines those globals in the process.
 */
import { fileURLToPath, pathToFileURL } from 'node:url';
export interface Recorded {
  type: string;
  name: string;
  args: Record<string, unknown>;
  /** Pulumi's resource options (dependsOn, ignoreChanges, …). */
  opts: Record<string, unknown>;
  self: Record<string, unknown>;
}

let recorded: Recorded[] = [];

class Placeholder {
  constructor(readonly ref: string) {}
  toString() {
    return `\${${this.ref}}`;
  }
  apply(f: (v: string) => unknown) {
    return f(this.toString());
  }
}

function resource(type: string, outputs: string[]) {
  return class {
    [key: string]: unknown;
    constructor(name: string, args: Record<string, unknown> = {}, opts: Record<string, unknown> = {}) {
      for (const o of outputs) this[o] = new Placeholder(`${type}.${name}.${o}`);
      recorded.push({ type, name, args, opts, self: this });
    }
  };
}

export const render = (v: unknown): string => (v instanceof Placeholder ? v.toString() : typeof v === 'string' ? v : JSON.stringify(v));

Object.assign(globalThis, {
  $config: <T>(config: T) => config,
  $app: { name: 'esopt', stage: 'test' },
  $interpolate: (strings: TemplateStringsArray, ...values: unknown[]) => strings.reduce((out, s, i) => out + s + (i < values.length ? render(values[i]) : ''), ''),
  $util: { asset: { FileAsset: class { constructor(readonly path: string) {} } } },
  $jsonStringify: (value: unknown) => JSON.stringify(value, (_k, v) => (v instanceof Placeholder ? v.toString() : v)),
  sst: {
    Secret: resource('sst.Secret', ['value', 'name']),
    aws: { Bucket: resource('sst.aws.Bucket', ['name', 'arn']), Function: resource('sst.aws.Function', ['name', 'arn', 'url']) },
  },
  aws: {
    getCallerIdentityOutput: () => ({ accountId: new Placeholder('aws.getCallerIdentity.accountId') }),
    getPartitionOutput: () => ({ partition: new Placeholder('aws.getPartition.partition') }),
    s3: { BucketObjectv2: resource('aws.s3.BucketObjectv2', ['key', 'id']), BucketLifecycleConfigurationV2: resource('aws.s3.BucketLifecycleConfigurationV2', []) },
    lambda: { FunctionUrl: resource('aws.lambda.FunctionUrl', ['functionUrl']), Permission: resource('aws.lambda.Permission', []) },
    ssm: { Parameter: resource('aws.ssm.Parameter', ['name', 'arn', 'value']) },
    cloudwatch: {
      LogGroup: resource('aws.cloudwatch.LogGroup', ['name', 'arn']),
      MetricAlarm: resource('aws.cloudwatch.MetricAlarm', []),
      LogMetricFilter: resource('aws.cloudwatch.LogMetricFilter', []),
    },
    sns: { Topic: resource('aws.sns.Topic', ['arn']), TopicSubscription: resource('aws.sns.TopicSubscription', []) },
    iam: {
      Role: resource('aws.iam.Role', ['id', 'name', 'arn']),
      RolePolicy: resource('aws.iam.RolePolicy', []),
      InstanceProfile: resource('aws.iam.InstanceProfile', ['name']),
      RolePolicyAttachment: resource('aws.iam.RolePolicyAttachment', []),
    },
    ec2: {
      SecurityGroup: resource('aws.ec2.SecurityGroup', ['id']),
      Instance: resource('aws.ec2.Instance', ['id', 'arn', 'publicIp']),
      Eip: resource('aws.ec2.Eip', ['id', 'publicIp', 'allocationId']),
      EipAssociation: resource('aws.ec2.EipAssociation', []),
      getAmiOutput: (args: unknown) => ({ id: new Placeholder(`ami(${JSON.stringify(args)})`) }),
    },
  },
});

type StackConfig = { app(input?: { stage?: string }): Record<string, unknown>; run(): Promise<Record<string, unknown>> };
let config: StackConfig | undefined;

/**
 * The project's sst.config.ts, read as the deploy reads it: a file of the repository root (which is above
 * trainer/, so it is loaded by path, the way `sst` loads it, not imported as a module of trainer/).
 */
async function loadConfig(): Promise<StackConfig> {
  const file = fileURLToPath(new URL('../../../sst.config.ts', import.meta.url));
  config ??= (await import(/* @vite-ignore */ pathToFileURL(file).href)).default as StackConfig;
  return config;
}

/** The app half of the config ($config's `app`). */
export async function stackApp(input?: { stage?: string }): Promise<Record<string, unknown>> {
  return (await loadConfig()).app(input);
}

/** The deploying machine's Node: the config requires the functions' major (22), whatever runs these tests. */
async function onNode<T>(version: string, work: () => Promise<T>): Promise<T> {
  const real = Object.getOwnPropertyDescriptor(process, 'versions')!;
  Object.defineProperty(process, 'versions', { ...real, value: { ...process.versions, node: version } });
  try {
    return await work();
  } finally {
    Object.defineProperty(process, 'versions', real);
  }
}

/** Runs the config with these deploy settings (ESOPT_* only those given) on a deploying Node of this version. */
export async function evaluate(env: Record<string, string> = {}, node = '22.21.1') {
  const config = await loadConfig();
  recorded = [];
  const saved = { ...process.env };
  for (const k of Object.keys(process.env)) if (k.startsWith('ESOPT_')) delete process.env[k];
  Object.assign(process.env, env);
  let outputs: Record<string, unknown>;
  try {
    outputs = await onNode(node, () => config.run());
  } finally {
    for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
    Object.assign(process.env, saved);
  }
  const all = recorded;
  const one = (type: string, name: string) => {
    const r = all.find((x) => x.type === type && x.name === name);
    if (!r) throw new Error(`no ${type} ${name}; recorded: ${recordedNames(all).join(', ')}`);
    return r;
  };
  return { outputs, one, recorded: all };
}

export function recordedNames(all: Recorded[]): string[] {
  return all.map((x) => `${x.type} ${x.name}`).sort();
}

/** Lambda's defaults where sst.aws.Function leaves a setting out (SST v3.18.10 platform/src/components/aws/function.ts). */
const SST_DEFAULTS = { memoryMb: 1024, timeoutS: 20, ephemeralStorageMb: 512 } as const;

/** One `sst.aws.Function` of the stack, as `sst deploy` builds and configures it. */
export interface StackFunction {
  /** The resource name (`Api`, `Episode`). */
  name: string;
  /** `<file without extension>.<export>` relative to the repository root, as written in sst.config.ts. */
  handler: string;
  runtime: string;
  memoryMb: number;
  timeoutS: number;
  /** /tmp's size (`storage`). */
  ephemeralStorageMb: number;
  /** `nodejs.install`: installed beside the bundle, and external to it. */
  install: string[];
  /** `nodejs.esbuild.external`. */
  esbuildExternal: string[];
  minify: boolean;
  /** `nodejs.banner`, appended to SST's own banner. */
  banner: string;
  /** `copyFiles`, `to` defaulting to `from` as SST does. */
  copyFiles: Array<{ from: string; to: string }>;
  /** The variables the function is given, deploy-time values as `${Type.Name.prop}` placeholders. */
  environment: Record<string, string>;
}

/** Parses SST's `"<n> MB"` / `"<n> GB"` sizes. */
export function sizeMb(value: unknown, what: string): number {
  const m = typeof value === 'string' ? /^(\d+(?:\.\d+)?) (MB|GB)$/.exec(value) : null;
  if (!m) throw new Error(`${what}: expected "<n> MB" or "<n> GB", got ${JSON.stringify(value)}`);
  return Number(m[1]) * (m[2] === 'GB' ? 1024 : 1);
}

/** Parses SST's `"<n> seconds"` / `"<n> minutes"` durations. */
export function durationS(value: unknown, what: string): number {
  const m = typeof value === 'string' ? /^(\d+) (second|minute)s?$/.exec(value) : null;
  if (!m) throw new Error(`${what}: expected "<n> seconds" or "<n> minutes", got ${JSON.stringify(value)}`);
  return Number(m[1]) * (m[2] === 'minute' ? 60 : 1);
}

/** The NodeJS options the rehearsal reproduces; any other is refused rather than silently built differently. */
const KNOWN_NODEJS_OPTIONS = new Set(['install', 'esbuild', 'minify', 'banner']);

/** Every `sst.aws.Function` the config declares with these deploy settings, read as the deploy reads it. */
export async function stackFunctions(env: Record<string, string> = {}): Promise<StackFunction[]> {
  const { recorded: all } = await evaluate(env);
  return all.filter((r) => r.type === 'sst.aws.Function').map((r) => stackFunction(r));
}

export function stackFunction({ name, args }: Recorded): StackFunction {
  const nodejs = (args.nodejs ?? {}) as { install?: string[]; esbuild?: { external?: string[] } & Record<string, unknown>; minify?: boolean; banner?: string };
  for (const key of Object.keys(nodejs)) {
    if (!KNOWN_NODEJS_OPTIONS.has(key)) throw new Error(`function ${name}: nodejs.${key} is not reproduced by the rehearsal (trainer/dev/rehearsal/sst-build.ts)`);
  }
  for (const key of Object.keys(nodejs.esbuild ?? {})) {
    if (key !== 'external') throw new Error(`function ${name}: nodejs.esbuild.${key} is not reproduced by the rehearsal (trainer/dev/rehearsal/sst-build.ts)`);
  }
  if (typeof args.handler !== 'string') throw new Error(`function ${name}: no handler`);
  const copyFiles = ((args.copyFiles ?? []) as Array<{ from: string; to?: string }>).map((c) => ({ from: c.from, to: c.to || c.from }));
  return {
    name,
    handler: args.handler,
    runtime: String(args.runtime),
    memoryMb: args.memory === undefined ? SST_DEFAULTS.memoryMb : sizeMb(args.memory, `function ${name} memory`),
    timeoutS: args.timeout === undefined ? SST_DEFAULTS.timeoutS : durationS(args.timeout, `function ${name} timeout`),
    ephemeralStorageMb: args.storage === undefined ? SST_DEFAULTS.ephemeralStorageMb : sizeMb(args.storage, `function ${name} storage`),
    install: nodejs.install ?? [],
    esbuildExternal: nodejs.esbuild?.external ?? [],
    minify: nodejs.minify ?? false,
    banner: nodejs.banner ?? '',
    copyFiles,
    environment: Object.fromEntries(Object.entries((args.environment ?? {}) as Record<string, unknown>).map(([k, v]) => [k, render(v)])),
  };
}
