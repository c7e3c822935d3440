/**
 * The deployed stack on one machine, from what a deploy ships: sst.config.ts read as `sst deploy` reads it,
 * every function built as SST builds it (sst-build.ts) and run under AWS's runtime interface client with
 * Lambda's limits (lambda-function.ts), the Api behind a function-URL front, the Episode function behind
 * the Lambda Invoke API, and each box installed from the deploy's artifact by its own boot script
 * (box-install.ts) and started as its unit. s3rver and the local SSM stand in for S3 and SSM. What
 * differs from AWS is listed in `replaced`, each with its reason.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startLocalS3, type LocalS3 } from '../local-cloud/s3-server.ts';
import { startLogsEndpoint, type LogsEndpoint } from '../local-cloud/logs-endpoint.ts';
import { startSsmEndpoint, type SsmEndpoint } from '../local-cloud/ssm-endpoint.ts';
import { startEc2Endpoint } from '../local-cloud/ec2-endpoint.ts';
import { startInvokeEndpoint, type InvokeEndpoint } from '../local-cloud/invoke-endpoint.ts';
import { keys } from '../../../shared/keys.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import { bucketStore } from '../../assembly/stores.ts';
import { buildBoxArtifact } from '../../cloud/box/box-artifact.ts';
import { freeLoopbackPort } from '../../serving/free-port.ts';
import { startBoxService, type BoxService } from './box-service.ts';
import { bootVariables, rehearseBoxInstall, type ReplacedStep } from './box-install.ts';
import { fillEnvironment, fillPlaceholders, type DeployValues } from './deploy-values.ts';
import { startFunctionUrl, type FunctionUrl } from './function-url.ts';
import { startLambdaFunction, type LambdaFunction } from './lambda-function.ts';
import { seedIsolatedVmPrebuild } from './prebuilt-binaries.ts';
import { buildFunction, type FunctionBuild } from './sst-build.ts';
import { evaluate, render, stackFunction, type StackFunction } from './sst-stack.ts';

export const REHEARSAL_STAGE = 'rehearsal';
/** The trainer box's instance id in the rehearsal (the dev EC2 endpoint knows it). */
const REHEARSAL_TRAINER_INSTANCE = 'i-0e5a1c0de0000cafe';
const REGION = 'us-east-1';
/** s3rver's development key pair; the local SSM and invoke endpoints check no signature. */
const LOCAL_CREDENTIALS = { AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER' };

export interface RehearsalOptions {
  /** The checkout to deploy (sst.config.ts's directory). */
  root: string;
  /** ESOPT_REPLICAS: the trainer box and R − 1 replica boxes. */
  replicas?: number;
  /**
   * `npm-ci`: each box runs its boot's `npm ci --omit=dev` from the lock file, as deployed (minutes);
   * `link`: that one step links the checkout's node_modules instead (the test suite's choice, listed in `replaced`).
   */
  boxInstall?: 'npm-ci' | 'link';
  /** Most execution environments a function may have at once (Lambda scales to the reserved concurrency). */
  maxEnvironments?: number;
  log?: (message: string) => void;
}

export interface RehearsedFunction {
  definition: StackFunction;
  build: FunctionBuild;
  lambda: LambdaFunction;
}

export interface Rehearsal {
  apiUrl: string;
  /** The API's bearer token (the ApiToken secret). */
  token: string;
  /** The boxes' and the Episode function's (the TrainerToken secret), which the API refuses. */
  boxToken: string;
  bucket: string;
  /**
   * What a user's shell holds to reach the bucket with the `--cloud` commands that write it directly
   * (`esopt tasks push`, `instructions push`, `models push`): its name, region, and here s3rver's endpoint and key pair.
   */
  bucketEnv: Record<string, string>;
  store: ObjectStore;
  s3: LocalS3;
  ssm: SsmEndpoint;
  /** CloudWatch Logs on loopback, holding the boxes' log group the stack declares. */
  logs: LogsEndpoint;
  invoke: InvokeEndpoint;
  functions: Record<string, RehearsedFunction>;
  boxes: BoxService[];
  replaced: ReplacedStep[];
  workDir: string;
  close(): Promise<void>;
}

const REHEARSAL_REPLACED: ReplacedStep[] = [
  { step: 'provider', deployed: 'cuda on a GPU instance type (the default g5.xlarge): onnxruntime-node\'s CUDA binaries fetched at boot', rehearsal: 'ESOPT_TRAINER_PROVIDER=cpu: no GPU here and no route to the binaries\' host' },
  { step: 'S3, SSM, CloudWatch Logs and EC2', deployed: 'the stack\'s bucket, Parameter Store, the boxes\' log group and the trainer instance the Api starts', rehearsal: 's3rver, the local SSM, CloudWatch Logs and EC2 endpoints on loopback, reached through AWS_ENDPOINT_URL_S3 / _SSM / _CLOUDWATCH_LOGS / _EC2 and a development key pair instead of each role\'s credentials (IAM is checked by test/cloud/least-privilege.test.ts, not here)' },
  { step: 'Lambda Invoke', deployed: 'the Lambda service', rehearsal: 'the Invoke API stand-in (trainer/dev/local-cloud/invoke-endpoint.ts) routing to the rehearsed Episode function' },
  { step: 'endpoint networks', deployed: 'ESOPT_ENDPOINT_NETWORKS unset: environment servers, rollout agents and MCP servers on public addresses only', rehearsal: 'ESOPT_ENDPOINT_NETWORKS=loopback: the servers users would bring run on this machine' },
  { step: 'addresses', deployed: 'Elastic IPs, the box listening on 0.0.0.0', rehearsal: 'one loopback address a box (127.0.0.2, 127.0.0.3, …) on the deploy\'s inference port; `--host 0.0.0.0` becomes that address' },
];

/** Starts the rehearsed stack; `close()` stops every part of it. */
export async function startRehearsal(o: RehearsalOptions): Promise<Rehearsal> {
  const log = o.log ?? (() => {});
  const replicas = o.replicas ?? 1;
  const workDir = mkdtempSync(join(tmpdir(), 'esopt-rehearsal-'));
  const closers: Array<() => Promise<void>> = [];
  const close = async () => {
    for (const c of closers.reverse()) await c().catch((err) => log(`closing: ${(err as Error).message}`));
    rmSync(workDir, { recursive: true, force: true });
  };
  try {
    const token = randomBytes(32).toString('hex');
    // The API's own token (the ApiToken secret), apart from the boxes' (TrainerToken).
    const apiToken = randomBytes(32).toString('hex');
    const s3 = await startLocalS3(`esopt-${REHEARSAL_STAGE}-runs`);
    closers.push(() => s3.close());
    const ssm = await startSsmEndpoint();
    closers.push(() => ssm.close());
    const boxLogGroup = `/esopt/${REHEARSAL_STAGE}/boxes`;
    const logs = await startLogsEndpoint([boxLogGroup]);
    closers.push(() => logs.close());
    const store = bucketStore(s3.storeConfig);
    closers.push(async () => store.destroy());

    // The deploy's settings: the defaults, but a free inference port (every box shares it, each on its own address).
    const port = await freeLoopbackPort();
    // The CPU provider: the default instance type is a GPU one (provider cuda), and this machine has no GPU.
    const settings = { ESOPT_INFERENCE_PORT: String(port), ESOPT_REPLICAS: String(replicas), ESOPT_AWS_REGION: REGION, ESOPT_TRAINER_PROVIDER: 'cpu', ESOPT_ENDPOINT_NETWORKS: 'loopback' };
    const stack = await evaluate(settings);
    const boxAddress = (n: number) => `127.0.0.${2 + n}`;
    const artifact = buildBoxArtifact(o.root);
    const values: DeployValues = {
      'sst.aws.Bucket.Runs.name': s3.bucket,
      'sst.aws.Bucket.Runs.arn': `arn:aws:s3:::${s3.bucket}`,
      'sst.Secret.TrainerToken.value': token,
      'sst.Secret.ApiToken.value': apiToken,
      'aws.ssm.Parameter.TrainerTokenParameter.value': token,
      'aws.ec2.Instance.Trainer.id': REHEARSAL_TRAINER_INSTANCE,
      'sst.aws.Function.Episode.name': `esopt-${REHEARSAL_STAGE}-Episode`,
      'sst.aws.Function.Api.name': `esopt-${REHEARSAL_STAGE}-Api`,
      'aws.ec2.Eip.TrainerAddress.publicIp': boxAddress(0),
      'aws.ssm.Parameter.TrainerTokenParameter.name': `/esopt/${REHEARSAL_STAGE}/trainer-token`,
      'aws.cloudwatch.LogGroup.BoxLogs.name': boxLogGroup,
      'aws.s3.BucketObjectv2.TrainerArtifact.key': artifact.key,
      ...Object.fromEntries(Array.from({ length: replicas - 1 }, (_, i) => [`aws.ec2.Eip.ReplicaAddress${i + 1}.publicIp`, boxAddress(i + 1)])),
    };
    // The trainer box as EC2 sees it: the Api starts it when it queues work (it runs here already).
    const ec2 = await startEc2Endpoint({ [REHEARSAL_TRAINER_INSTANCE]: 'running' });
    closers.push(() => ec2.close());
    const endpoints = { ...LOCAL_CREDENTIALS, AWS_ENDPOINT_URL_S3: s3.endpoint, AWS_ENDPOINT_URL_SSM: ssm.url, AWS_ENDPOINT_URL_CLOUDWATCH_LOGS: logs.url, AWS_ENDPOINT_URL_EC2: ec2.url };

    // What the deploy uploads and creates before the boxes boot: the artifact, the token parameter.
    await store.put(artifact.key, new Uint8Array(readFileSync(artifact.path)));
    // And the objects it writes with their content inline: the stack's prices, and the pointer to the artifact the boxes install.
    for (const object of stack.recorded.filter((r) => r.type === 'aws.s3.BucketObjectv2' && typeof r.args.content === 'string')) {
      await store.put(fillPlaceholders(render(object.args.key), values, `${object.name}'s key`), fillPlaceholders(String(object.args.content), values, `${object.name}'s content`));
    }
    const { PutParameterCommand, SSMClient } = await import('@aws-sdk/client-ssm');
    const ssmClient = new SSMClient({ region: REGION, endpoint: ssm.url, credentials: { accessKeyId: LOCAL_CREDENTIALS.AWS_ACCESS_KEY_ID, secretAccessKey: LOCAL_CREDENTIALS.AWS_SECRET_ACCESS_KEY } });
    await ssmClient.send(new PutParameterCommand({ Name: values['aws.ssm.Parameter.TrainerTokenParameter.name']!, Type: 'SecureString', Value: token }));
    ssmClient.destroy();

    // isolated-vm's prebuilt binary where the deploy's npm installs look for it before GitHub.
    const prebuild = seedIsolatedVmPrebuild(o.root);
    // The functions, built and started as deployed.
    const functions: Record<string, RehearsedFunction> = {};
    for (const name of ['Episode', 'Api']) {
      const definition = stackFunction(stack.one('sst.aws.Function', name));
      log(`building ${name} as sst deploy builds it …`);
      const build = await buildFunction(definition, { root: o.root });
      log(`${name}: ${(build.bytes / 1e6).toFixed(1)} MB unzipped${build.cached ? ' (cached build)' : ''}; ${definition.memoryMb} MB memory, ${definition.ephemeralStorageMb} MB /tmp, ${definition.timeoutS} s`);
      const environment = { ...fillEnvironment(definition.environment, values, `function ${name}`), ...endpoints, AWS_REGION: REGION };
      const lambda = await startLambdaFunction({
        name: values[`sst.aws.Function.${name}.name`]!,
        codeDir: build.dir,
        handler: build.handler,
        memoryMb: definition.memoryMb,
        ephemeralStorageMb: definition.ephemeralStorageMb,
        timeoutS: definition.timeoutS,
        environment,
        maxEnvironments: o.maxEnvironments ?? 4,
        workDir: join(workDir, 'lambda', name),
      });
      closers.push(() => lambda.close());
      functions[name] = { definition, build, lambda };
    }
    const invoke = await startInvokeEndpoint({ [values['sst.aws.Function.Episode.name']!]: (event) => functions.Episode!.lambda.invokeOrThrow(event) });
    closers.push(() => invoke.close());
    const url: FunctionUrl = await startFunctionUrl(functions.Api!.lambda);
    closers.push(() => url.close());

    // The boxes: each boots from its own user data into an empty directory, then its unit starts.
    const boxes: BoxService[] = [];
    const instances = ['Trainer', ...Array.from({ length: replicas - 1 }, (_, i) => `Replica${i + 1}`)];
    let bootReplaced: ReplacedStep[] = [];
    for (const [n, instance] of instances.entries()) {
      const userData = fillPlaceholders(String(stack.one('aws.ec2.Instance', instance).args.userData), values, `${instance}'s user data`);
      const variables = bootVariables(userData);
      const root = join(workDir, 'boxes', instance);
      mkdirSync(root, { recursive: true });
      log(`${instance}: booting from its user data (${o.boxInstall === 'link' ? 'node_modules linked' : 'npm ci from the lock file'}) …`);
      const install = await rehearseBoxInstall({
        root,
        variables,
        s3Endpoint: s3.endpoint,
        ssmEndpoint: ssm.url,
        // The script splits the step into words (no shell quoting), hence a path without spaces.
        ...(o.boxInstall === 'link' ? { npmCiStep: `ln -s ${join(o.root, 'node_modules').replace(/\s/g, '\\$&')} node_modules` } : {}),
      });
      bootReplaced = install.replaced;
      if (install.exitCode !== 0 || !install.service) {
        throw new Error(`${instance}'s boot failed at ${install.state?.step ?? 'an unknown step'}: ${install.state?.error ?? `exit ${install.exitCode}`}\n${install.log.split('\n').slice(-20).join('\n')}`);
      }
      const host = boxAddress(n);
      const command = install.service.command.map((arg, i, all) => (all[i - 1] === '--host' ? host : arg));
      boxes.push(
        await startBoxService({
          id: variables.ESOPT_BOOT_BOX,
          command,
          cwd: install.service.cwd,
          env: { ...install.service.env, ...endpoints, AWS_ENDPOINT_URL_LAMBDA: invoke.url, PATH: process.env.PATH ?? '' },
          host,
          port,
          logFile: join(root, 'service.log'),
          // The trainer box is up once it has published its certificate, which the Episode function pins.
          ...(n === 0 ? { ready: async () => (await store.get(keys.trainerCertificate())) !== null } : {}),
        }),
      );
      closers.push(() => boxes[n]!.stop());
      log(`${instance}: ${variables.ESOPT_BOOT_SERVICE} serving on https://${host}:${port}/v1`);
    }
    const replaced = [
      ...REHEARSAL_REPLACED,
      ...(prebuild ? [{ step: 'prebuilt binaries', deployed: `prebuild-install downloads ${prebuild.package}'s binary from GitHub (${prebuild.url})`, rehearsal: "the binary this checkout's own install built for the same version, Node ABI and platform, put in prebuild-install's cache: GitHub is out of reach here" }] : []),
      ...bootReplaced,
      { step: 'service (user)', deployed: 'the unit runs as its unprivileged user (User=, hardening: docs/CLOUD.md, "Box boot")', rehearsal: 'the service runs as this process\'s user: the checkout it may link need not be readable by another (test/rehearsal/box-boot.test.ts runs the unit\'s command as the user)' },
      ...(o.boxInstall === 'link' ? [{ step: 'npm ci', deployed: 'npm ci --omit=dev from the lock file (the box builds its native modules)', rehearsal: "a link to the checkout's node_modules: the suite's time" }] : []),
    ];
    const bucketEnv = { ESOPT_BUCKET: s3.bucket, AWS_REGION: REGION, AWS_ENDPOINT_URL_S3: s3.endpoint, ...LOCAL_CREDENTIALS };
    return { apiUrl: url.url, token: apiToken, boxToken: token, bucket: s3.bucket, bucketEnv, store, s3, ssm, logs, invoke, functions, boxes, replaced, workDir, close };
  } catch (err) {
    await close();
    throw err;
  }
}
