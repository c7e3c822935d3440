/**
 * sst.config.ts evaluated offline (trainer/dev/rehearsal/sst-stack.ts: the SST and Pulumi globals replaced by
 * recorders); the test asserts the topology the file declares: resources, links, environment variables,
 * permissions, user data. Deploy-time values (ARNs, IPs) appear as `${Type.Name.prop}` placeholders.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { bootVariables as bootAssignments } from '../../trainer/dev/rehearsal/box-install.ts';
import { EpisodeFunctionEnv } from '../../functions/episode.ts';
import { CloudApiEnv } from '../../functions/http-api/cloud-app.ts';
import { keys, parseRewardKey, retentionTags } from '../../shared/keys.ts';
import { EPISODE_INSTALLED_PACKAGES } from './helpers/episode-packages.ts';

import { evaluate, recordedNames, render, stackApp } from '../../trainer/dev/rehearsal/sst-stack.ts';
import { pricesFromEnv } from '../../functions/cost-prices-env.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';
import { ArtifactPointer } from '../../shared/schemas/index.ts';

type Permission = { actions: string[]; resources: string[] };
const BOOT_SCRIPT = readFileSync('trainer/cloud/box/box-boot.sh', 'utf8');
/** The ESOPT_BOOT_* assignments a box's user data makes before the boot script's text. */
/** A user data's ESOPT_BOOT_* assignments, as the rehearsal reads them, by their names without the prefix. */
const bootVariables = (userData: string) => Object.fromEntries(Object.entries(bootAssignments(userData)).map(([k, v]) => [k.slice('ESOPT_BOOT_'.length), v]));
const EVALUATION_KEYS_ARN = 'arn:${aws.getPartition.partition}:ssm:us-east-1:${aws.getCallerIdentity.accountId}:parameter/esopt/test/eval-keys/*';

describe('sst.config.ts', () => {
  it('declares the stack: secret, bucket, Episode and Api functions, the GPU trainer with its role and security group', async () => {
    const { recorded } = await evaluate();
    expect(recordedNames(recorded)).toEqual([
      'aws.cloudwatch.LogGroup BoxLogs',
      'aws.cloudwatch.LogMetricFilter BoxServiceErrors',
      'aws.cloudwatch.MetricAlarm ApiErrors',
      'aws.cloudwatch.MetricAlarm ApiThrottles',
      'aws.cloudwatch.MetricAlarm BoxServiceErrors',
      'aws.cloudwatch.MetricAlarm EpisodeErrors',
      'aws.cloudwatch.MetricAlarm EpisodeThrottles',
      'aws.cloudwatch.MetricAlarm TrainerStatusCheck',
      'aws.ec2.Eip TrainerAddress',
      'aws.ec2.EipAssociation TrainerAddressAssociation',
      'aws.ec2.Instance Trainer',
      'aws.ec2.SecurityGroup TrainerSecurityGroup',
      'aws.iam.InstanceProfile TrainerProfile',
      'aws.iam.Role TrainerRole',
      'aws.iam.RolePolicy TrainerIdleStopPolicy',
      'aws.iam.RolePolicy TrainerInvokePolicy',
      'aws.iam.RolePolicy TrainerLogsPolicy',
      'aws.iam.RolePolicy TrainerPolicy',
      'aws.iam.RolePolicy TrainerSessionManagerPolicy',
      'aws.lambda.FunctionUrl ApiUrl',
      'aws.lambda.Permission ApiUrlInvokeFunction',
      'aws.lambda.Permission ApiUrlInvokeUrl',
      'aws.s3.BucketLifecycleConfigurationV2 RunsLifecycle',
      'aws.s3.BucketObjectv2 ArtifactPointer',
      'aws.s3.BucketObjectv2 CostPrices',
      'aws.s3.BucketObjectv2 TrainerArtifact',
      'aws.sns.Topic Alarms',
      'aws.ssm.Parameter TrainerTokenParameter',
      'sst.Secret ApiToken',
      'sst.Secret TrainerToken',
      'sst.aws.Bucket Runs',
      'sst.aws.Function Api',
      'sst.aws.Function Episode',
    ]);
    expect(await stackApp({ stage: 'production' })).toMatchObject({ name: 'esopt', home: 'aws', removal: 'retain' });
    expect(await stackApp({ stage: 'dev' })).toMatchObject({ removal: 'remove' });
  });

  it('gives the Episode function memory, timeout, reserved concurrency and exactly the environment its handler reads', async () => {
    const { one } = await evaluate();
    const episode = one('sst.aws.Function', 'Episode').args;
    const bucket = one('sst.aws.Bucket', 'Runs').self;
    const token = one('sst.Secret', 'TrainerToken').self;
    const address = one('aws.ec2.Eip', 'TrainerAddress').self;
    expect(episode).toMatchObject({ handler: 'functions/episode.handler', runtime: 'nodejs22.x', memory: '1024 MB', storage: '512 MB', timeout: '900 seconds', concurrency: { reserved: 200 } });
    // What the package-size test measures against Lambda's limits.
    expect(episode.nodejs).toEqual({ install: EPISODE_INSTALLED_PACKAGES });
    const env = episode.environment as Record<string, unknown>;
    expect(Object.keys(env).sort()).toEqual(['ESOPT_BUCKET', 'ESOPT_COST_PRICES', 'ESOPT_TRAINER_TOKEN', 'ESOPT_TRAINER_URL', 'NODE_OPTIONS']);
    // isolated-vm (the heuristic environment's sandbox) needs Node >= 20 started without its startup snapshot.
    expect(env.NODE_OPTIONS).toBe('--no-node-snapshot');
    expect(env.ESOPT_BUCKET).toBe(bucket.name);
    // The parameter's value, so a rotation updates the parameter the box follows before the function (docs/CLOUD.md, "Rotating the token").
    expect(env.ESOPT_TRAINER_TOKEN).toBe(one('aws.ssm.Parameter', 'TrainerTokenParameter').self.value);
    expect(one('aws.ssm.Parameter', 'TrainerTokenParameter').args.value).toBe(token.value);
    // The box's fixed address, which is attached to the instance.
    // over HTTPS: the Episode function pins the certificate the box publishes (trainer-link.test.ts).
    expect(env.ESOPT_TRAINER_URL).toBe(`https://${render(address.publicIp)}:8080/v1`);
    expect(one('aws.ec2.EipAssociation', 'TrainerAddressAssociation').args).toEqual({ instanceId: one('aws.ec2.Instance', 'Trainer').self.id, allocationId: address.allocationId });
    // The handler accepts this environment (placeholders standing in for the deploy-time strings).
    const asDeployed = Object.fromEntries(Object.entries(env).map(([k, v]) => [k, k === 'ESOPT_TRAINER_URL' ? 'https://203.0.113.7:8080/v1' : render(v)]));
    expect(EpisodeFunctionEnv.safeParse(asDeployed).success).toBe(true);
    // And the handler file exists with that export.
    expect(typeof (await import('../../functions/episode.ts')).handler).toBe('function');
  });

  it('lets the Episode function write rewards, transcripts and frames, read manifests, pinned task folders and evaluation keys, nothing else (no bucket link)', async () => {
    const { one } = await evaluate();
    const episode = one('sst.aws.Function', 'Episode').args;
    const arn = render(one('sst.aws.Bucket', 'Runs').self.arn);
    expect(episode.link ?? []).toEqual([]);
    const all = (episode.permissions as { actions: string[]; resources: unknown[] }[]).map((p): Permission => ({ actions: p.actions, resources: p.resources.map(render) }));
    // Besides the bucket: only reading the evaluation keys under this stage's path (least-privilege.test.ts).
    expect(all.filter((p) => p.actions.some((a) => !a.startsWith('s3:')))).toEqual([{ actions: ['ssm:GetParameter'], resources: [EVALUATION_KEYS_ARN] }]);
    const permissions = all.filter((p) => p.actions.every((a) => a.startsWith('s3:')));
    const actions = new Set(permissions.flatMap((p) => p.actions));
    expect([...actions].sort()).toEqual(['s3:GetObject', 's3:ListBucket', 's3:PutObject', 's3:PutObjectTagging']);
    for (const p of permissions) {
      for (const r of p.resources) expect(r === arn || r.startsWith(`${arn}/`), r).toBe(true);
      if (p.actions.includes('s3:ListBucket')) expect(p.resources).toEqual([arn]);
    }
    // Writes go to reward, transcript and frame keys only: every resource granting PutObject matches keys.reward(...),
    // keys.transcript(...) or keys.frame(...) and nothing wider.
    const writable = permissions.filter((p) => p.actions.includes('s3:PutObject')).flatMap((p) => p.resources);
    expect(writable).toEqual([`${arn}/runs/*/iterations/*/rewards/*`, `${arn}/runs/*/iterations/*/transcripts/*`, `${arn}/runs/*/iterations/*/frames/*`]);
    const matches = (pattern: string, key: string) => new RegExp(`^${pattern.slice(arn.length + 1).replace(/\*/g, '[^]*')}$`).test(key);
    const writableBy = (key: string) => writable.some((w) => matches(w, key));
    expect(parseRewardKey('runs/r1/iterations/00000003/rewards/7/task-1.json')).not.toBeNull();
    expect(writableBy(keys.reward('r1', 3, 7, 'task-1'))).toBe(true);
    expect(writableBy(keys.transcript('r1', 3, 'base', 'task-1'))).toBe(true);
    expect(writableBy(keys.frame('r1', 3, 'base', 'task-1', 'attempt-1', 0))).toBe(true);
    for (const other of [keys.manifest('r1', 3), keys.checkpointWeights('r1', 3), keys.config('r1'), keys.queuedWork('run', 'r1'), keys.workClaim('run', 'r1')]) {
      expect(writableBy(other), other).toBe(false);
    }
    const readable = permissions.filter((p) => p.actions.includes('s3:GetObject')).flatMap((p) => p.resources);
    expect(readable.sort()).toEqual(
      [`${arn}/runs/*/iterations/*/manifest.json`, `${arn}/runs/*/iterations/*/rewards/*`, `${arn}/runs/*/iterations/*/transcripts/*`, `${arn}/runs/*/iterations/*/frames/*`, `${arn}/task-folders/manifests/*`, `${arn}/task-folders/blobs/*`, `${arn}/${keys.trainerCertificate()}`].sort(),
    );
  });

  it('serves the Api function through a function URL, with its own permissions rather than a bucket link (least-privilege.test.ts lists them)', async () => {
    const { one, outputs } = await evaluate();
    const api = one('sst.aws.Function', 'Api');
    // No native module: isolated-vm is left out of the bundle and never installed (the sandbox imports it on first use).
    expect(api.args).toMatchObject({ handler: 'functions/api.handler', runtime: 'nodejs22.x', nodejs: { esbuild: { external: ['isolated-vm'] } } });
    expect((api.args.nodejs as { install?: unknown }).install).toBeUndefined();
    expect(Object.keys(api.args.environment as object).sort()).toEqual(['ESOPT_API_RATE_BURST', 'ESOPT_API_RATE_PER_SECOND', 'ESOPT_BUCKET', 'ESOPT_COST_PRICES', 'ESOPT_EVALUATION_KEYS', 'ESOPT_TOKEN', 'ESOPT_TRAINER_INSTANCE']);
    // The trainer box's instance, which the Api starts when it queues work.
    expect((api.args.environment as Record<string, unknown>).ESOPT_TRAINER_INSTANCE).toBe(one('aws.ec2.Instance', 'Trainer').self.id);
    // The files the API reads at run time (sst-build.test.ts serves each from the built package).
    expect((api.args.copyFiles as Array<{ from: string }>).map((c) => c.from)).toEqual([
      'functions/http-api/dashboard',
      'node_modules/uplot/dist/uPlot.iife.min.js',
      'node_modules/uplot/dist/uPlot.min.css',
      'node_modules/swagger-ui-dist/swagger-ui.css',
      'node_modules/swagger-ui-dist/swagger-ui-bundle.js',
    ]);
    // The stage's path, which the IAM statements' ARN ends in.
    expect((api.args.environment as Record<string, unknown>).ESOPT_EVALUATION_KEYS).toBe('/esopt/test/eval-keys');
    expect(CloudApiEnv.safeParse(Object.fromEntries(Object.entries(api.args.environment as object).map(([k, v]) => [k, k === 'ESOPT_TOKEN' ? 'a-token-of-sixteen-or-more' : k === 'ESOPT_TRAINER_INSTANCE' ? 'i-0a1b2c3d4e5f60718' : render(v)]))).success).toBe(true);
    // The API's own token, not the one the boxes' inference port and the Episode function hold.
    expect((api.args.environment as Record<string, unknown>).ESOPT_TOKEN).toBe(one('sst.Secret', 'ApiToken').self.value);
    expect(one('sst.Secret', 'ApiToken').self.value).not.toBe(one('sst.Secret', 'TrainerToken').self.value);
    expect(Object.values(one('sst.aws.Function', 'Episode').args.environment as object)).not.toContain(one('sst.Secret', 'ApiToken').self.value);
    expect(api.args.link).toBeUndefined();
    expect(outputs.apiUrl).toBe(one('aws.lambda.FunctionUrl', 'ApiUrl').self.functionUrl);
    expect(typeof (await import('../../functions/api.ts')).handler).toBe('function');
  });

  it('passes the stack-wide cost caps to the Api function when set (and only then), and refuses a bad one', async () => {
    const api = (await evaluate({ ESOPT_MAX_RUN_COST_USD: '25', ESOPT_MAX_EVALUATION_COST_USD: '2.5' })).one('sst.aws.Function', 'Api');
    const env = api.args.environment as Record<string, unknown>;
    expect([env.ESOPT_MAX_RUN_COST_USD, env.ESOPT_MAX_EVALUATION_COST_USD]).toEqual(['25', '2.5']);
    expect(CloudApiEnv.parse({ ESOPT_BUCKET: 'runs', ESOPT_TOKEN: 'a-token-of-sixteen-or-more', ESOPT_EVALUATION_KEYS: '/esopt/test/eval-keys', ESOPT_COST_PRICES: '{}', ESOPT_MAX_RUN_COST_USD: '25', ESOPT_MAX_EVALUATION_COST_USD: '2.5' })).toMatchObject({ ESOPT_MAX_RUN_COST_USD: 25, ESOPT_MAX_EVALUATION_COST_USD: 2.5 });
    await expect(evaluate({ ESOPT_MAX_RUN_COST_USD: '0' })).rejects.toThrow(/ESOPT_MAX_RUN_COST_USD/);
  });

  it("prices episodes with the instance type's measured decode rate, one JSON for the functions and the box, overridable", async () => {
    const at = async (env: Record<string, string>) => {
      const { one, outputs } = await evaluate(env);
      const episodePrices = (one('sst.aws.Function', 'Episode').args.environment as Record<string, string>).ESOPT_COST_PRICES;
      const apiPrices = (one('sst.aws.Function', 'Api').args.environment as Record<string, string>).ESOPT_COST_PRICES;
      const stored = one('aws.s3.BucketObjectv2', 'CostPrices').args;
      expect(apiPrices).toBe(episodePrices);
      expect(stored).toMatchObject({ key: 'stack/prices.json', content: episodePrices });
      // What the handlers read is what the stack wrote.
      return { prices: pricesFromEnv(episodePrices), basis: outputs.costBasis };
    };
    const local = measuredPrices();
    // No measurement recorded for g5.xlarge yet: the default one, and the output says so.
    const g5 = await at({});
    expect(g5.prices).toEqual(local);
    expect(g5.basis).toBe('local-cpu/tiny (no measurement recorded for g5.xlarge)');
    const overridden = await at({ ESOPT_COST_PRICES: '{"gpuUsdPerHour":2.5,"gpuSecondsPerToken":0.004}' });
    expect(overridden.prices).toEqual({ ...local, gpuUsdPerHour: 2.5, gpuSecondsPerToken: 0.004 });
    expect(overridden.basis).toBe('ESOPT_COST_PRICES');
    await expect(evaluate({ ESOPT_COST_PRICES: '{"gpuUsdPerHour":-1}' })).rejects.toThrow(/ESOPT_COST_PRICES: [^]*Too small[^]*gpuUsdPerHour/);
    await expect(evaluate({ ESOPT_COST_PRICES: 'cheap' })).rejects.toThrow(/not JSON[^]*ESOPT_COST_PRICES/);
  });

  it('lets the Api function be invoked through its URL only: no grant of lambda:InvokeFunction that a direct call meets', async () => {
    const { one, recorded } = await evaluate();
    const api = one('sst.aws.Function', 'Api');
    // SST's own URL (`url: true`) grants lambda:InvokeFunction to "*" with no condition: any account could call the function directly.
    expect(api.args.url).toBeUndefined();
    expect(one('aws.lambda.FunctionUrl', 'ApiUrl').args).toEqual({ functionName: api.self.name, authorizationType: 'NONE' });
    const permissions = recorded.filter((r) => r.type === 'aws.lambda.Permission').map((r) => r.args);
    expect(permissions).toHaveLength(2);
    for (const p of permissions) expect(p.function).toBe(api.self.name);
    // What each statement lets an unauthenticated caller do: the URL, and an invoke that came through it.
    const direct = permissions.filter((p) => p.action === 'lambda:InvokeFunction');
    expect(direct).toEqual([{ function: api.self.name, action: 'lambda:InvokeFunction', principal: '*', invokedViaFunctionUrl: true }]);
    expect(permissions.filter((p) => p.action === 'lambda:InvokeFunctionUrl')).toEqual([{ function: api.self.name, action: 'lambda:InvokeFunctionUrl', principal: '*', functionUrlAuthType: 'NONE' }]);
    // Nothing else in the stack grants an invoke of the Api function (the trainer's role invokes the Episode function only).
    expect(JSON.stringify(recorded.filter((r) => r.type === 'aws.iam.RolePolicy').map((r) => r.args.policy))).not.toContain(render(api.self.arn));
  });

  it('keeps the bucket versioned with a lifecycle for what accumulates, and encrypts the boxes\' disks', async () => {
    const { one, recorded } = await evaluate({ ESOPT_REPLICAS: '2' });
    expect(one('sst.aws.Bucket', 'Runs').args).toEqual({ versioning: true });
    const lifecycle = one('aws.s3.BucketLifecycleConfigurationV2', 'RunsLifecycle').args as { bucket: unknown; rules: Array<Record<string, any>> };
    expect(lifecycle.bucket).toBe(one('sst.aws.Bucket', 'Runs').self.name);
    const rule = (id: string) => lifecycle.rules.find((r) => r.id === id);
    expect(rule('noncurrent-versions')).toMatchObject({ status: 'Enabled', noncurrentVersionExpiration: { noncurrentDays: 30 } });
    expect(rule('old-artifacts')).toMatchObject({ status: 'Enabled', filter: { prefix: 'artifacts/' }, expiration: { days: 90 } });
    expect(rule('idempotency-records')).toMatchObject({ filter: { prefix: 'idempotency/' } });
    // Transcripts by the tag the Episode function puts on them (shared/keys.ts), after ESOPT_TRANSCRIPT_DAYS.
    const [[tagKey, tagValue]] = Object.entries(retentionTags.transcript);
    expect(rule('transcripts')).toMatchObject({ status: 'Enabled', filter: { tag: { key: tagKey, value: tagValue } }, expiration: { days: 30 } });
    // No rule reaches into a run's own records.
    for (const r of lifecycle.rules) expect(r.filter.prefix ?? '').not.toMatch(/^runs\//);
    // The artifact rule covers the key every deploy writes.
    expect(render(one('aws.s3.BucketObjectv2', 'TrainerArtifact').args.key)).toMatch(/^artifacts\//);
    const instances = recorded.filter((r) => r.type === 'aws.ec2.Instance');
    expect(instances.map((i) => i.name)).toEqual(['Trainer', 'Replica1']);
    for (const i of instances) expect(i.args.rootBlockDevice).toMatchObject({ encrypted: true, volumeType: 'gp3' });
    const longer = await evaluate({ ESOPT_NONCURRENT_DAYS: '7', ESOPT_ARTIFACT_DAYS: '365' });
    const rules = (longer.one('aws.s3.BucketLifecycleConfigurationV2', 'RunsLifecycle').args as { rules: Array<Record<string, any>> }).rules;
    expect(rules.find((r) => r.id === 'noncurrent-versions')?.noncurrentVersionExpiration).toEqual({ noncurrentDays: 7 });
    expect(rules.find((r) => r.id === 'old-artifacts')?.expiration).toEqual({ days: 365 });
    expect((await evaluate({ ESOPT_TRANSCRIPT_DAYS: '3' })).one('aws.s3.BucketLifecycleConfigurationV2', 'RunsLifecycle').args).toMatchObject({ rules: expect.arrayContaining([expect.objectContaining({ id: 'transcripts', expiration: { days: 3 } })]) });
    await expect(evaluate({ ESOPT_ARTIFACT_DAYS: '1' })).rejects.toThrow(/ESOPT_ARTIFACT_DAYS/);
  });

  it('boots a g5/g6-class trainer that installs esopt and runs `esopt trainer-box` on the stack, the token fetched from SSM (never in user data)', async () => {
    const { one } = await evaluate();
    const instance = one('aws.ec2.Instance', 'Trainer').args;
    expect(instance.instanceType).toMatch(/^g[56]\./);
    expect(instance.vpcSecurityGroupIds).toEqual([one('aws.ec2.SecurityGroup', 'TrainerSecurityGroup').self.id]);
    expect(instance.iamInstanceProfile).toBe(one('aws.iam.InstanceProfile', 'TrainerProfile').self.name);
    const userData = instance.userData as string;
    // The boot is trainer/cloud/box/box-boot.sh, whole, after the variables that name this stack (the rehearsal runs the same text).
    expect(userData).toMatch(/^#!\/bin\/bash\n(ESOPT_BOOT_[A-Z0-9_]+='[^'\n]*'\n)+/);
    expect(userData.endsWith(BOOT_SCRIPT.replace(/^#![^\n]*\n/, ''))).toBe(true);
    expect(userData.length).toBeLessThan(16 * 1024);
    // No remote script piped into a shell: Node is the official tarball, checked by its SHA-256.
    expect(userData).not.toMatch(/nodesource|curl[^\n]*\|\s*(ba)?sh|git clone|github\.com/);
    expect(userData).toMatch(/https:\/\/nodejs\.org\/dist\/v\$NODE_VERSION\/\$name/);
    expect(userData).toContain('NODE_VERSION=22.21.1\n');
    expect(userData).toContain('[x64]=680d3f30b24a7ff24b98db5e96f294c0070f8f9078df658da1bce1b9c9873c88\n');
    expect(userData).toContain('| sha256sum --check --strict -\n');
    expect(userData).toContain('npm ci --omit=dev');
    // Exactly the variables the script requires, naming this stack; the poller, serving inference on the open port at the address the Episode function is told.
    const url = render((one('sst.aws.Function', 'Episode').args.environment as Record<string, unknown>).ESOPT_TRAINER_URL);
    const required = /^for required in ([A-Z0-9_ ]+); do$/m.exec(BOOT_SCRIPT)?.[1].split(' ');
    const vars = bootVariables(userData);
    expect(Object.keys(vars).sort()).toEqual([...required!].sort());
    expect(vars).toEqual({
      BOX: 'trainer',
      REGION: 'us-east-1',
      BUCKET: render(one('sst.aws.Bucket', 'Runs').self.name),
      TOKEN_PARAMETER: render(one('aws.ssm.Parameter', 'TrainerTokenParameter').self.name),
      EPISODE_FUNCTION: render(one('sst.aws.Function', 'Episode').self.name),
      SERVICE: 'esopt-trainer-box',
      DESCRIPTION: 'esopt trainer box: runs the runs and evaluations queued in the bucket',
      // Idle stop after 30 minutes; the old token accepted for the episode timeout (900 s) and a minute more.
      ARGS: `trainer-box --idle-minutes 30 --token-grace-s 960 --host 0.0.0.0 --port 8080 --public-url ${url} --provider cuda`,
      PROVIDER: 'cuda',
      LOG_GROUP: render(one('aws.cloudwatch.LogGroup', 'BoxLogs').self.name),
      STOP_TIMEOUT_S: '1020',
    });
    expect(userData).not.toMatch(/bin\.js serve /);
    // The service's environment names the stack exactly as the command reads it (assembly/cloud-stack.ts), in a root-only file.
    const envFile = /cat >"\$ENV_FILE" <<ENV\n([^]*?)\nENV\n/.exec(userData)?.[1].split('\n') ?? [];
    expect(envFile).toEqual(['ESOPT_TOKEN=$TOKEN', 'ESOPT_BUCKET=$ESOPT_BOOT_BUCKET', 'ESOPT_EPISODE_FUNCTION=$ESOPT_BOOT_EPISODE_FUNCTION', 'AWS_REGION=$ESOPT_BOOT_REGION', 'ESOPT_LOG_GROUP=$ESOPT_BOOT_LOG_GROUP', 'ESOPT_LOG_STREAM=$ESOPT_BOOT_BOX', 'ESOPT_ARTIFACT_SHA256=$ARTIFACT_SHA256', 'ESOPT_TOKEN_PARAMETER=$ESOPT_BOOT_TOKEN_PARAMETER']);
    expect(userData).toMatch(/install -m 600 \/dev\/null "\$ENV_FILE"/);
    expect(userData).not.toContain(render(one('sst.Secret', 'TrainerToken').self.value));
    expect(one('aws.ssm.Parameter', 'TrainerTokenParameter').args).toMatchObject({ type: 'SecureString', value: one('sst.Secret', 'TrainerToken').self.value });
    const policy = JSON.parse(one('aws.iam.RolePolicy', 'TrainerPolicy').args.policy as string) as { Statement: { Action: string[]; Resource: string[] }[] };
    const ssm = policy.Statement.find((s) => s.Action.includes('ssm:GetParameter'));
    expect(ssm?.Resource).toEqual([render(one('aws.ssm.Parameter', 'TrainerTokenParameter').self.arn)]);
    // Its boot state, boxes/trainer/boot.json, is among the trainer's writes, which are by prefix: never the artifact.
    const put = policy.Statement.find((s) => s.Action.includes('s3:PutObject'));
    expect(put?.Resource.map((r) => render(r))).toContain(`${render(one('sst.aws.Bucket', 'Runs').self.arn)}/boxes/trainer/boot.json`);
    const bucketArn = render(one('sst.aws.Bucket', 'Runs').self.arn);
    expect(put?.Resource.map((r) => render(r)).filter((r) => r === `${bucketArn}/*` || r.startsWith(`${bucketArn}/artifacts/`) || r.startsWith(`${bucketArn}/stack/`))).toEqual([]);
    // The trainer may invoke the Episode function (esopt trainer-box, esopt train --cloud), and only that function.
    const invoke = JSON.parse(one('aws.iam.RolePolicy', 'TrainerInvokePolicy').args.policy as string) as { Statement: { Action: string[]; Resource: string[] }[] };
    expect(invoke.Statement).toEqual([{ Effect: 'Allow', Action: ['lambda:InvokeFunction'], Resource: [render(one('sst.aws.Function', 'Episode').self.arn)] }]);
    expect(one('aws.iam.RolePolicy', 'TrainerInvokePolicy').args.role).toBe(one('aws.iam.Role', 'TrainerRole').self.id);
    const { one: two } = await evaluate({ ESOPT_TRAINER_INSTANCE_TYPE: 'g6.2xlarge', ESOPT_INFERENCE_PORT: '9000', ESOPT_EPISODE_TIMEOUT_S: '300' });
    expect(two('aws.ec2.Instance', 'Trainer').args.instanceType).toBe('g6.2xlarge');
    expect(bootVariables(two('aws.ec2.Instance', 'Trainer').args.userData as string)).toMatchObject({ ARGS: expect.stringContaining('--port 9000 '), STOP_TIMEOUT_S: '420' });
    // A short episode timeout keeps the 10-minute grace; ESOPT_BOX_IDLE_MINUTES=0 turns the idle stop off.
    expect(bootVariables(two('aws.ec2.Instance', 'Trainer').args.userData as string).ARGS).toMatch(/^trainer-box --idle-minutes 30 --token-grace-s 600 /);
    expect(bootVariables((await evaluate({ ESOPT_BOX_IDLE_MINUTES: '0' })).one('aws.ec2.Instance', 'Trainer').args.userData as string).ARGS).toMatch(/^trainer-box --idle-minutes 0 /);
    await expect(evaluate({ ESOPT_BOX_IDLE_MINUTES: '-5' })).rejects.toThrow(/ESOPT_BOX_IDLE_MINUTES/);
    // The CUDA provider, the default on a GPU type (g5.xlarge above): the script installs its binaries after
    // npm ci, and the poller is told to use it. CPU types (and Graviton's g5g) default to cpu; a setting wins.
    const providerOf = async (env: Record<string, string>) => bootVariables((await evaluate(env)).one('aws.ec2.Instance', 'Trainer').args.userData as string);
    expect(await providerOf({ ESOPT_TRAINER_INSTANCE_TYPE: 'p5.48xlarge' })).toMatchObject({ PROVIDER: 'cuda', ARGS: expect.stringMatching(/ --provider cuda$/) });
    expect(await providerOf({ ESOPT_TRAINER_INSTANCE_TYPE: 'm7i.2xlarge' })).toMatchObject({ PROVIDER: 'cpu', ARGS: expect.stringMatching(/ --provider cpu$/) });
    expect(await providerOf({ ESOPT_TRAINER_INSTANCE_TYPE: 'g5g.xlarge' })).toMatchObject({ PROVIDER: 'cpu' });
    expect(await providerOf({ ESOPT_TRAINER_PROVIDER: 'cpu' })).toMatchObject({ PROVIDER: 'cpu', ARGS: expect.stringMatching(/ --provider cpu$/) });
    expect(BOOT_SCRIPT).toMatch(/if \[ "\$ESOPT_BOOT_PROVIDER" = cuda \]; then\n    step cuda\n    ONNXRUNTIME_NODE_INSTALL=cuda12 retry node node_modules\/onnxruntime-node\/script\/install\.js\n/);
    await expect(evaluate({ ESOPT_TRAINER_PROVIDER: 'tpu' })).rejects.toThrow(/ESOPT_TRAINER_PROVIDER/);
  });

  it('lets Session Manager onto every box (no key pair, no SSH port), and pins the boxes to ESOPT_TRAINER_ZONE when set', async () => {
    const { one, recorded } = await evaluate({ ESOPT_REPLICAS: '2' });
    // An inline policy of what the agent calls, not AWS's AmazonSSMManagedInstanceCore (which reads every parameter).
    expect(recorded.filter((r) => r.type === 'aws.iam.RolePolicyAttachment')).toEqual([]);
    const sessions = recorded.filter((r) => r.type === 'aws.iam.RolePolicy' && /SessionManagerPolicy/.test(r.name));
    expect(sessions.map((a) => [a.name, a.args.role])).toEqual([
      ['TrainerSessionManagerPolicy', one('aws.iam.Role', 'TrainerRole').self.id],
      ['ReplicaSessionManagerPolicy1', one('aws.iam.Role', 'ReplicaRole1').self.id],
    ]);
    for (const a of sessions) {
      const actions = (JSON.parse(a.args.policy as string) as { Statement: { Action: string[] }[] }).Statement.flatMap((st) => st.Action);
      expect(actions).toContain('ssmmessages:OpenDataChannel');
      expect(actions.filter((x) => /^ssm:Get|^ssm:.*Parameter/.test(x))).toEqual([]);
    }
    for (const i of recorded.filter((r) => r.type === 'aws.ec2.Instance')) {
      expect(i.args.keyName).toBeUndefined();
      expect(i.args.availabilityZone).toBeUndefined();
    }
    const pinned = await evaluate({ ESOPT_TRAINER_ZONE: 'us-east-1b' });
    expect(pinned.one('aws.ec2.Instance', 'Trainer').args.availabilityZone).toBe('us-east-1b');
    await expect(evaluate({ ESOPT_TRAINER_ZONE: 'us-east-1' })).rejects.toThrow(/ESOPT_TRAINER_ZONE/);
  });

  it("ships the boxes' logs to one group each box may only append to, and alarms on Lambda errors and throttles, box health and box errors", async () => {
    const { one, recorded, outputs } = await evaluate({ ESOPT_REPLICAS: '2', ESOPT_LOG_DAYS: '14' });
    const group = one('aws.cloudwatch.LogGroup', 'BoxLogs');
    expect(group.args).toEqual({ name: '/esopt/test/boxes', retentionInDays: 14 });
    for (const [policy, role] of [['TrainerLogsPolicy', 'TrainerRole'], ['ReplicaLogsPolicy1', 'ReplicaRole1']]) {
      const p = one('aws.iam.RolePolicy', policy);
      expect(p.args.role).toBe(one('aws.iam.Role', role).self.id);
      expect(JSON.parse(p.args.policy as string).Statement).toEqual([{ Effect: 'Allow', Action: ['logs:CreateLogStream', 'logs:PutLogEvents'], Resource: [`${render(group.self.arn)}:*`] }]);
    }
    expect(outputs).toMatchObject({ boxLogGroup: group.self.name, alarmTopic: one('aws.sns.Topic', 'Alarms').self.arn });
    expect(render(outputs.episodeLogGroup)).toBe(`/aws/lambda/${render(one('sst.aws.Function', 'Episode').self.name)}`);
    expect(render(outputs.apiLogGroup)).toBe(`/aws/lambda/${render(one('sst.aws.Function', 'Api').self.name)}`);
    const alarms = recorded.filter((r) => r.type === 'aws.cloudwatch.MetricAlarm');
    expect(alarms.map((a) => a.name).sort()).toEqual(['ApiErrors', 'ApiThrottles', 'BoxServiceErrors', 'EpisodeErrors', 'EpisodeThrottles', 'Replica1StatusCheck', 'TrainerStatusCheck']);
    for (const a of alarms) expect(a.args).toMatchObject({ alarmActions: [one('aws.sns.Topic', 'Alarms').self.arn], comparisonOperator: 'GreaterThanOrEqualToThreshold', threshold: 1, treatMissingData: 'notBreaching' });
    expect(one('aws.cloudwatch.MetricAlarm', 'EpisodeThrottles').args).toMatchObject({ namespace: 'AWS/Lambda', metricName: 'Throttles', dimensions: { FunctionName: one('sst.aws.Function', 'Episode').self.name } });
    expect(one('aws.cloudwatch.MetricAlarm', 'Replica1StatusCheck').args).toMatchObject({ namespace: 'AWS/EC2', metricName: 'StatusCheckFailed', dimensions: { InstanceId: one('aws.ec2.Instance', 'Replica1').self.id } });
    expect(one('aws.cloudwatch.LogMetricFilter', 'BoxServiceErrors').args).toMatchObject({ logGroupName: group.self.name, pattern: '{ $.level >= 50 }' });
    // mailed only when an address is given
    expect(recorded.filter((r) => r.type === 'aws.sns.TopicSubscription')).toEqual([]);
    const mailed = await evaluate({ ESOPT_ALARM_EMAIL: 'ops@example.com' });
    expect(mailed.one('aws.sns.TopicSubscription', 'AlarmEmail').args).toMatchObject({ protocol: 'email', endpoint: 'ops@example.com' });
    await expect(evaluate({ ESOPT_LOG_DAYS: '10' })).rejects.toThrow(/ESOPT_LOG_DAYS/);
    await expect(evaluate({ ESOPT_ALARM_EMAIL: 'not-an-address' })).rejects.toThrow(/ESOPT_ALARM_EMAIL/);
  });

  it('uploads the deployed tree as a content-addressed artifact that a pointer names, and the box installs exactly that, checked by its hash', async () => {
    const { one, outputs } = await evaluate();
    const object = one('aws.s3.BucketObjectv2', 'TrainerArtifact');
    const path = (object.args.source as { path: string }).path;
    const sha256 = createHash('sha256').update(readFileSync(path)).digest('hex');
    expect(outputs.artifactSha256).toBe(sha256);
    expect(object.args).toMatchObject({ bucket: one('sst.aws.Bucket', 'Runs').self.name, key: `artifacts/esopt-${sha256}.tgz` });
    // The pointer every box reads (box-boot.sh, trainer-box.ts), in the bucket under the key they read.
    const pointer = one('aws.s3.BucketObjectv2', 'ArtifactPointer').args;
    expect(pointer).toMatchObject({ bucket: one('sst.aws.Bucket', 'Runs').self.name, key: keys.artifactPointer() });
    // The key is the uploaded object's (an output at deploy time, filled in by Pulumi; the rehearsal fills it the same way).
    expect(JSON.parse(pointer.content as string)).toEqual({ key: render(object.self.key), sha256 });
    expect(ArtifactPointer.parse({ key: object.args.key, sha256 })).toEqual({ key: object.args.key, sha256 });
    // Each box is created after the pointer exists, and its user data names no artifact.
    const trainer = one('aws.ec2.Instance', 'Trainer');
    expect(trainer.opts.dependsOn).toEqual([one('aws.s3.BucketObjectv2', 'ArtifactPointer').self]);
    expect(trainer.args.userData).not.toContain(sha256);
    // The pointer read, the artifact downloaded, checked, unpacked beside the installed tree, then the lock file's dependencies.
    const steps = BOOT_SCRIPT.split('\n').map((l) => l.trim());
    const at = (re: RegExp) => steps.findIndex((l) => re.test(l));
    expect(steps[at(/^retry aws s3 cp .*POINTER_KEY/)]).toBe('retry aws s3 cp --only-show-errors --region "$ESOPT_BOOT_REGION" "s3://$ESOPT_BOOT_BUCKET/$POINTER_KEY" "$WORK_DIR/artifact.json"');
    expect(BOOT_SCRIPT).toContain(`POINTER_KEY=${keys.artifactPointer()}\n`);
    expect(steps[at(/^retry aws s3 cp .*\$key/)]).toBe('retry aws s3 cp --only-show-errors --region "$ESOPT_BOOT_REGION" "s3://$ESOPT_BOOT_BUCKET/$key" "$WORK_DIR/esopt.tgz"');
    const check = steps[at(/ARTIFACT_SHA256 .*sha256sum/)];
    expect(check).toBe('echo "$ARTIFACT_SHA256  $WORK_DIR/esopt.tgz" | sha256sum --check --strict -');
    expect(at(/^retry aws s3 cp .*POINTER_KEY/)).toBeLessThan(at(/^retry aws s3 cp .*\$key/));
    expect(at(/^retry aws s3 cp .*\$key/)).toBeLessThan(at(/ARTIFACT_SHA256 .*sha256sum/));
    const unpack = steps[at(/^tar -xzf "\$WORK_DIR\/esopt\.tgz"/)];
    expect(at(/ARTIFACT_SHA256 .*sha256sum/)).toBeLessThan(at(/^tar -xzf "\$WORK_DIR\/esopt\.tgz"/));
    expect(at(/^tar -xzf/)).toBeLessThan(at(/npm ci --omit=dev/));
    // The box's check, run here: it passes for the uploaded bytes and stops the boot (set -e) for any other.
    const box = mkdtempSync(join(tmpdir(), 'esopt-box-'));
    const run = (script: string) => spawnSync('bash', ['-euo', 'pipefail', '-c', `mkdir -p "$next"; ${script}`], { encoding: 'utf8', env: { ...process.env, ARTIFACT_SHA256: sha256, WORK_DIR: box, next: join(box, 'opt') } });
    copyFileSync(path, join(box, 'esopt.tgz'));
    expect(run(check).status).toBe(0);
    expect(run(unpack).status).toBe(0);
    // What it unpacks is this tree: the lock file npm ci installs from, the CLI the unit starts; no node_modules, no .git.
    for (const f of ['package.json', 'package-lock.json', 'trainer/cli/bin.js', 'sst.config.ts']) expect(readFileSync(join(box, 'opt', f), 'utf8'), f).toBe(readFileSync(f, 'utf8'));
    expect(existsSync(join(box, 'opt', 'node_modules'))).toBe(false);
    expect(existsSync(join(box, 'opt', '.git'))).toBe(false);
    const tampered = readFileSync(path);
    tampered[tampered.length - 20] ^= 1;
    writeFileSync(join(box, 'esopt.tgz'), tampered);
    expect(run(check).status).not.toBe(0);
    // The same tree, the same artifact.
    const { outputs: again } = await evaluate();
    expect(again.artifactSha256).toBe(sha256);
    // The old source settings are refused by name rather than ignored.
    await expect(evaluate({ ESOPT_SOURCE_GIT: 'https://example.com/fork.git' })).rejects.toThrow(/invalid deploy settings: ESOPT_SOURCE_GIT is no longer read/);
  });

  it('deploys a docs-only change without touching an instance: new artifact and pointer, the same user data and image', async () => {
    const boxes = (stack: Awaited<ReturnType<typeof evaluate>>) =>
      stack.recorded.filter((r) => r.type === 'aws.ec2.Instance').map((r) => ({ name: r.name, userData: r.args.userData, ami: r.args.ami, opts: JSON.stringify(r.opts) }));
    const before = await evaluate({ ESOPT_REPLICAS: '2' });
    // An untracked file is part of the artifact (box-artifact.ts), as an edited doc would be.
    const probe = join('docs', `.deploy-probe-${process.pid}.md`);
    writeFileSync(probe, 'a docs-only change\n');
    let after: Awaited<ReturnType<typeof evaluate>>;
    try {
      after = await evaluate({ ESOPT_REPLICAS: '2' });
    } finally {
      rmSync(probe, { force: true });
    }
    expect(after.outputs.artifactSha256).not.toBe(before.outputs.artifactSha256);
    expect(after.one('aws.s3.BucketObjectv2', 'ArtifactPointer').args.content).not.toBe(before.one('aws.s3.BucketObjectv2', 'ArtifactPointer').args.content);
    expect(boxes(after)).toEqual(boxes(before));
    // The image: found at creation and then kept (a newer AMI never replaces a box), or pinned by id.
    const trainer = before.one('aws.ec2.Instance', 'Trainer');
    expect(trainer.opts.ignoreChanges).toEqual(['ami']);
    const pinned = (await evaluate({ ESOPT_TRAINER_AMI: 'ami-0123456789abcdef0' })).one('aws.ec2.Instance', 'Trainer');
    expect(pinned.args.ami).toBe('ami-0123456789abcdef0');
    expect(pinned.opts.ignoreChanges).toBeUndefined();
    await expect(evaluate({ ESOPT_TRAINER_AMI: 'ubuntu-latest' })).rejects.toThrow(/ESOPT_TRAINER_AMI/);
  });

  it('deploys only from Node 22, the functions\' runtime (isolated-vm is installed for the deploying Node)', async () => {
    // nodejs20.x no longer takes new or updated functions; a binary built for another Node would not load on 22.
    for (const other of ['20.20.2', '24.11.0']) await expect(evaluate({}, other)).rejects.toThrow(`deploy from Node 22 (this is Node ${other})`);
    const { one } = await evaluate({}, '22.0.0');
    expect(one('sst.aws.Function', 'Episode').args.runtime).toBe('nodejs22.x');
  });

  it('deploys ESOPT_REPLICAS trainer boxes: each replica box with its own address, role and replica-box service, all behind the one port rule', async () => {
    const { one, recorded, outputs } = await evaluate({ ESOPT_REPLICAS: '3', ESOPT_TRAINER_PROVIDER: 'cuda' });
    const names = recordedNames(recorded);
    expect(names.filter((n) => n.startsWith('aws.ec2.Instance '))).toEqual(['aws.ec2.Instance Replica1', 'aws.ec2.Instance Replica2', 'aws.ec2.Instance Trainer']);
    expect(names.filter((n) => n.startsWith('aws.ec2.Eip '))).toEqual(['aws.ec2.Eip ReplicaAddress1', 'aws.ec2.Eip ReplicaAddress2', 'aws.ec2.Eip TrainerAddress']);
    expect(names.filter((n) => n.startsWith('aws.ec2.SecurityGroup '))).toEqual(['aws.ec2.SecurityGroup TrainerSecurityGroup']);
    const group = one('aws.ec2.SecurityGroup', 'TrainerSecurityGroup');
    const env = one('sst.aws.Function', 'Episode').args.environment as Record<string, unknown>;
    const urls: string[] = [];
    for (const n of [1, 2]) {
      const instance = one('aws.ec2.Instance', `Replica${n}`).args;
      const address = one('aws.ec2.Eip', `ReplicaAddress${n}`).self;
      const url = `https://${render(address.publicIp)}:8080/v1`;
      urls.push(`replica-${n}=${url}`);
      expect(one('aws.ec2.EipAssociation', `ReplicaAddressAssociation${n}`).args).toEqual({ instanceId: one('aws.ec2.Instance', `Replica${n}`).self.id, allocationId: address.allocationId });
      expect(instance).toMatchObject({ instanceType: 'g5.xlarge', vpcSecurityGroupIds: [group.self.id], iamInstanceProfile: one('aws.iam.InstanceProfile', `ReplicaProfile${n}`).self.name, metadataOptions: { httpTokens: 'required' } });
      expect(one('aws.iam.InstanceProfile', `ReplicaProfile${n}`).args.role).toBe(one('aws.iam.Role', `ReplicaRole${n}`).self.name);
      const userData = instance.userData as string;
      // The same boot, checked artifact and SSM token as the trainer box, then the replica box's service.
      expect(userData.endsWith(BOOT_SCRIPT.replace(/^#![^\n]*\n/, ''))).toBe(true);
      expect(bootVariables(userData)).toMatchObject({
        BOX: `replica-${n}`,
        PROVIDER: 'cuda',
        SERVICE: 'esopt-replica-box',
        TOKEN_PARAMETER: render(one('aws.ssm.Parameter', 'TrainerTokenParameter').self.name),
        ARGS: `replica-box --id replica-${n} --token-grace-s 960 --host 0.0.0.0 --port 8080 --public-url ${url} --provider cuda`,
      });
      expect(userData).not.toContain(render(one('sst.Secret', 'TrainerToken').self.value));
      // Its role may write its own boot state and no other box's.
      const replicaPolicy = JSON.parse(one('aws.iam.RolePolicy', `ReplicaPolicy${n}`).args.policy as string) as { Statement: { Action: string[]; Resource: string[] }[] };
      const writes = replicaPolicy.Statement.filter((s) => s.Action.includes('s3:PutObject')).flatMap((s) => s.Resource);
      expect(writes.filter((r) => r.includes('/boxes/'))).toEqual([`${render(one('sst.aws.Bucket', 'Runs').self.arn)}/boxes/replica-${n}/boot.json`]);
    }
    // The trainer box routes over all three; the Episode function may call exactly these origins, each pinned by id.
    expect(bootVariables(one('aws.ec2.Instance', 'Trainer').args.userData as string).ARGS).toMatch(/^trainer-box .* --provider cuda --replicas 3$/);
    expect(Object.keys(env).sort()).toEqual(['ESOPT_BUCKET', 'ESOPT_COST_PRICES', 'ESOPT_REPLICA_URLS', 'ESOPT_TRAINER_TOKEN', 'ESOPT_TRAINER_URL', 'NODE_OPTIONS']);
    expect(env.ESOPT_REPLICA_URLS).toBe(urls.join(','));
    expect(outputs.replicaUrls).toEqual(urls.map((u) => u.split('=')[1]));
    const asDeployed = EpisodeFunctionEnv.parse({ ESOPT_BUCKET: 'runs', ESOPT_COST_PRICES: JSON.stringify(measuredPrices()), ESOPT_TRAINER_URL: 'https://203.0.113.7:8080/v1', ESOPT_REPLICA_URLS: 'replica-1=https://203.0.113.8:8080/v1,replica-2=https://203.0.113.9:8080/v1' });
    expect(asDeployed.ESOPT_REPLICA_URLS).toEqual({ 'replica-1': 'https://203.0.113.8:8080/v1', 'replica-2': 'https://203.0.113.9:8080/v1' });
    // The port: open by default for every box, narrowed for all of them at once as configured.
    expect(group.args.ingress).toEqual([{ protocol: 'tcp', fromPort: 8080, toPort: 8080, cidrBlocks: ['0.0.0.0/0'], ipv6CidrBlocks: ['::/0'] }]);
    const { one: narrow } = await evaluate({ ESOPT_REPLICAS: '2', ESOPT_INFERENCE_CIDRS: '198.51.100.0/24' });
    expect(narrow('aws.ec2.SecurityGroup', 'TrainerSecurityGroup').args.ingress).toEqual([{ protocol: 'tcp', fromPort: 8080, toPort: 8080, cidrBlocks: ['198.51.100.0/24'] }]);
    expect(narrow('aws.ec2.Instance', 'Replica1').args.vpcSecurityGroupIds).toEqual([narrow('aws.ec2.SecurityGroup', 'TrainerSecurityGroup').self.id]);
    // One box (the default) declares no replica and tells nobody about replicas.
    const { recorded: single, one: first } = await evaluate({ ESOPT_REPLICAS: '1' });
    expect(recordedNames(single).filter((n) => /Replica/.test(n))).toEqual([]);
    expect(bootVariables(first('aws.ec2.Instance', 'Trainer').args.userData as string).ARGS).not.toContain('--replicas');
    for (const bad of ['0', '17', '1.5', 'two']) await expect(evaluate({ ESOPT_REPLICAS: bad }), bad).rejects.toThrow(/invalid deploy settings[^]*ESOPT_REPLICAS/);
  });

  it('opens the inference port to the world by default (Lambda has no fixed address), narrowed by ESOPT_INFERENCE_CIDRS; the link TLS with the certificate published where only the box writes', async () => {
    const ingress = async (env: Record<string, string>) => {
      const { one } = await evaluate(env);
      return one('aws.ec2.SecurityGroup', 'TrainerSecurityGroup').args.ingress;
    };
    const open = [{ protocol: 'tcp', fromPort: 8080, toPort: 8080, cidrBlocks: ['0.0.0.0/0'], ipv6CidrBlocks: ['::/0'] }];
    expect(await ingress({})).toEqual(open);
    expect(await ingress({ ESOPT_INFERENCE_CIDRS: '' })).toEqual(open);
    // The box serves TLS because its public URL is https (trainer-box's rule), and the Episode function pins what it publishes.
    const { one } = await evaluate();
    const url = render((one('sst.aws.Function', 'Episode').args.environment as Record<string, unknown>).ESOPT_TRAINER_URL);
    expect(url).toMatch(/^https:/);
    expect(bootVariables(one('aws.ec2.Instance', 'Trainer').args.userData as string).ARGS).toContain(`--public-url ${url} `);
    expect(await ingress({ ESOPT_INFERENCE_CIDRS: '10.0.0.0/16, 192.0.2.0/24', ESOPT_INFERENCE_PORT: '8443' })).toEqual([
      { protocol: 'tcp', fromPort: 8443, toPort: 8443, cidrBlocks: ['10.0.0.0/16', '192.0.2.0/24'] },
    ]);
    expect(await ingress({ ESOPT_INFERENCE_CIDRS: '2001:db8::/32,192.0.2.0/24' })).toEqual([{ protocol: 'tcp', fromPort: 8080, toPort: 8080, cidrBlocks: ['192.0.2.0/24'], ipv6CidrBlocks: ['2001:db8::/32'] }]);
    await expect(evaluate({ ESOPT_INFERENCE_CIDRS: '10.0.0.0/99' })).rejects.toThrow(/invalid deploy settings[^]*ESOPT_INFERENCE_CIDRS/);
  });
});
