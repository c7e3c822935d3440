/**
 * sst.config.ts evaluated offline: `sst install` needs the network, so the SST and Pulumi globals are
 * replaced by recorders ($config, $app, $interpolate, $jsonStringify, sst.*, aws.*) and `evaluateStack`
 * returns what the file declared: resources with their arguments, and the outputs. Deploy-time values
 * (ARNs, IPs) appear as `${Type.Name.prop}` placeholders.
 */
export interface Recorded {
  type: string;
  name: string;
  args: Record<string, unknown>;
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
    constructor(name: string, args: Record<string, unknown> = {}) {
      for (const o of outputs) this[o] = new Placeholder(`${type}.${name}.${o}`);
      recorded.push({ type, name, args, self: this });
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
    s3: { BucketObjectv2: resource('aws.s3.BucketObjectv2', ['key', 'id']) },
    ssm: { Parameter: resource('aws.ssm.Parameter', ['name', 'arn']) },
    iam: {
      Role: resource('aws.iam.Role', ['id', 'name', 'arn']),
      RolePolicy: resource('aws.iam.RolePolicy', []),
      InstanceProfile: resource('aws.iam.InstanceProfile', ['name']),
    },
    ec2: {
      SecurityGroup: resource('aws.ec2.SecurityGroup', ['id']),
      Instance: resource('aws.ec2.Instance', ['id', 'publicIp']),
      Eip: resource('aws.ec2.Eip', ['id', 'publicIp', 'allocationId']),
      EipAssociation: resource('aws.ec2.EipAssociation', []),
      getAmiOutput: (args: unknown) => ({ id: new Placeholder(`ami(${JSON.stringify(args)})`) }),
    },
  },
});

type StackConfig = { app(input?: { stage?: string }): Record<string, unknown>; run(): Promise<Record<string, unknown>> };
let config: StackConfig | undefined;

/** The app half of the config ($config's `app`). */
export async function stackApp(input?: { stage?: string }): Promise<Record<string, unknown>> {
  config ??= (await import('../../../sst.config.ts')).default as unknown as StackConfig;
  return config.app(input);
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
  config ??= (await import('../../../sst.config.ts')).default as unknown as StackConfig;
  recorded = [];
  const saved = { ...process.env };
  for (const k of Object.keys(process.env)) if (k.startsWith('ESOPT_')) delete process.env[k];
  Object.assign(process.env, env);
  let outputs: Record<string, unknown>;
  try {
    outputs = await onNode(node, () => config!.run());
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
