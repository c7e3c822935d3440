/**
 * The esopt stack on AWS (SST v3): a bucket for runs, the Episode function the trainer fans out to,
 * the Api function behind a function URL, and the GPU trainer box (EC2) that holds the weights and serves
 * inference for the members. The box runs `esopt trainer-box`: it claims the runs and evaluations the Api
 * function queues in the bucket and runs them through the Episode function. With ESOPT_REPLICAS = R > 1,
 * R − 1 replica boxes (`esopt replica-box`) follow the run it trains and serve a share of its members.
 *
 *   npx sst secret set ApiToken <token> --stage <stage>        # what API callers send (ESOPT_TOKEN of the CLI)
 *   npx sst secret set TrainerToken <token> --stage <stage>    # what the Episode function sends to the boxes' inference port
 *   npx sst deploy --stage <stage>
 *
 * Deploy-time settings come from the environment (ESOPT_*; see `DeployConfig` below and docs/CLOUD.md).
 * SST evaluates this file itself, so nothing is imported at the top (zod is loaded inside `run`), which is why the
 * whole stack is this one file, past the usual 300 lines.
 * test/cloud/sst-config.test.ts evaluates it with recorded stand-ins and asserts the topology.
 */
export default $config({
  app(input) {
    return {
      name: 'esopt',
      home: 'aws',
      removal: input?.stage === 'production' ? 'retain' : 'remove',
      protect: input?.stage === 'production',
      providers: { aws: { region: (process.env.ESOPT_AWS_REGION ?? 'us-east-1') as 'us-east-1' } },
    };
  },
  async run() {
    const { z } = await import('zod');
    const LOG_RETENTION_DAYS = [1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653];
    const DeployConfig = z.object({
      ESOPT_AWS_REGION: z.string().regex(/^[a-z]{2}(-[a-z]+)+-\d$/).default('us-east-1'),
      /** A g5 (A10G) or g6 (L4) class box by default; any EC2 type with a GPU works. */
      ESOPT_TRAINER_INSTANCE_TYPE: z.string().regex(/^[a-z0-9]+\.[a-z0-9]+$/).default('g5.xlarge'),
      /**
       * The boxes' image, by id: changing it replaces them. Unset, the newest "Deep Learning Base OSS Nvidia
       * Driver GPU AMI (Ubuntu 22.04)" at the boxes' creation, kept after it (a newer image never replaces a box).
       */
      ESOPT_TRAINER_AMI: z.string().regex(/^ami-([0-9a-f]{8}|[0-9a-f]{17})$/).optional(),
      ESOPT_TRAINER_DISK_GB: z.coerce.number().int().min(30).max(2000).default(100),
      /**
       * onnxruntime's execution provider on the box: unset, `cuda` on a GPU instance type (G and P families,
       * x86) and `cpu` on any other. `cuda` also installs onnxruntime-node's CUDA binaries at boot (the
       * repository's .npmrc skips them).
       */
      ESOPT_TRAINER_PROVIDER: z.enum(['cpu', 'cuda']).optional(),
      /** The zone the boxes launch in; unset, EC2 picks one of the default VPC's (`esopt cloud doctor` says whether each offers the type). */
      ESOPT_TRAINER_ZONE: z.string().regex(/^[a-z]{2}(-[a-z]+)+-\d[a-z]$/).optional(),
      ESOPT_INFERENCE_PORT: z.coerce.number().int().min(1024).max(65535).default(8080),
      /**
       * Who may reach the inference port, as CIDRs (IPv4 or IPv6). Unset: everyone (0.0.0.0/0 and ::/0), because
       * Lambda outside a VPC has no fixed addresses; what crosses the port is TLS with a certificate the Episode
       * function pins, behind the bearer token (docs/CLOUD.md, "Network"). Set it to narrow the port.
       */
      ESOPT_INFERENCE_CIDRS: z
        .string()
        .default('')
        .transform((s) => s.split(',').map((c) => c.trim()).filter(Boolean))
        .pipe(z.array(z.union([z.cidrv4(), z.cidrv6()]))),
      ESOPT_EPISODE_MEMORY_MB: z.coerce.number().int().min(128).max(10240).default(1024),
      ESOPT_EPISODE_TIMEOUT_S: z.coerce.number().int().min(10).max(900).default(900),
      /** Reserved concurrency: the most episodes in flight, and a cap on what a runaway fan-out can spend. */
      ESOPT_EPISODE_CONCURRENCY: z.coerce.number().int().min(1).max(10_000).default(200),
      /**
       * Reserved concurrency of the Api function: the most requests it serves at once, so a flood of them can
       * neither take the account's concurrency from the Episode function nor scale the bill without bound.
       */
      ESOPT_API_CONCURRENCY: z.coerce.number().int().min(1).max(1000).default(10),
      /** Requests a second per API token, sustained and at once, in each Api instance (functions/http-api/rate-limit.ts). */
      ESOPT_API_RATE_PER_SECOND: z.coerce.number().positive().finite().default(20),
      ESOPT_API_RATE_BURST: z.coerce.number().int().min(1).default(60),
      /**
       * Trainer replicas, the trainer box included: each further one is a box of the same type with its own
       * fixed address that follows the run the trainer box trains and serves a share of its members
       * (docs/TRAINER.md, Trainer replicas); R boxes bill while a run trains (costOfEpisodesWithReplicas).
       */
      ESOPT_REPLICAS: z.coerce.number().int().min(1).max(16).default(1),
      /** Days an overwritten or deleted object's previous version is kept (the bucket is versioned). */
      ESOPT_NONCURRENT_DAYS: z.coerce.number().int().min(1).max(3650).default(30),
      /** Days an evaluation episode's transcript is kept (the lifecycle expires it by its tag). */
      ESOPT_TRANSCRIPT_DAYS: z.coerce.number().int().min(1).max(3650).default(30),
      /** Days CloudWatch keeps the boxes' service logs (a retention CloudWatch offers). */
      ESOPT_LOG_DAYS: z.coerce.number().int().refine((d) => LOG_RETENTION_DAYS.includes(d), { message: `one of CloudWatch's retentions: ${LOG_RETENTION_DAYS.join(', ')}` }).default(30),
      /** Where the alarms (Lambda errors and throttles, box health, box service errors) are mailed; unset, they only show in CloudWatch. */
      ESOPT_ALARM_EMAIL: z.email().optional(),
      /** Days an artifact is kept after its deploy; a box installs at its first boot and at an update, so a box created later than this after the last deploy needs a deploy first. */
      ESOPT_ARTIFACT_DAYS: z.coerce.number().int().min(7).max(3650).default(90),
      /**
       * JSON of CostPrices fields to override (e.g. `{"gpuUsdPerHour":1.2}`); the rest are list prices and the
       * GPU share measured for the instance type (configs/decode-throughput.json, trainer/fanout/measured-prices.ts).
       */
      ESOPT_COST_PRICES: z
        .string()
        .optional()
        .transform((s, ctx) => {
          if (!s) return {};
          try {
            return JSON.parse(s) as Record<string, unknown>;
          } catch {
            ctx.addIssue({ code: 'custom', message: 'not JSON' });
            return z.NEVER;
          }
        }),
      /** Minutes with nothing running or queued after which the trainer box stops itself (0: never); the Api starts it when work is queued. */
      ESOPT_BOX_IDLE_MINUTES: z.coerce.number().int().min(0).max(10_080).default(30),
      /**
       * Stack-wide caps (USD) on a run's and an evaluation's spend: the Api gives a request without
       * `budget.maxCostUsd` the cap and refuses one above it; unset, a request without one is refused
       * (functions/http-api/cost-caps.ts).
       */
      ESOPT_MAX_RUN_COST_USD: z.coerce.number().positive().finite().optional(),
      ESOPT_MAX_EVALUATION_COST_USD: z.coerce.number().positive().finite().optional(),
      /**
       * Networks besides the public internet that endpoints users name (environment servers, rollout agents, MCP
       * servers) may be on: a comma-separated list of `private` and `loopback` (environments/outbound/address-policy.ts).
       * Unset: public addresses only. Link-local addresses (the metadata service) are never reachable.
       */
      ESOPT_ENDPOINT_NETWORKS: z.string().regex(/^\s*((private|loopback)\s*(,\s*(private|loopback)\s*)*)?$/, { message: 'a comma-separated list of "private" and "loopback"' }).optional(),
    });
    // Settings that no longer exist fail loudly rather than being ignored: the box runs the deployed tree.
    for (const gone of ['ESOPT_SOURCE_GIT', 'ESOPT_SOURCE_REF']) {
      if (process.env[gone] !== undefined) throw new Error(`invalid deploy settings: ${gone} is no longer read: the trainer box installs the artifact this deploy uploads (the working tree it runs from), checked by its SHA-256`);
    }
    const parsed = DeployConfig.safeParse(process.env);
    if (!parsed.success) throw new Error(`invalid deploy settings:\n${z.prettifyError(parsed.error)}`);
    // Lambda deprecated nodejs20.x on 2026-04-30 and has refused to create functions on it since 2026-08-31
    // (to update them since 2026-09-30); nodejs22.x is supported until 2027-04-30. SST installs the functions'
    // `nodejs.install` packages with the deploying machine's npm, and isolated-vm's install fetches or builds
    // its native binary for the Node that runs it: a deploy from any other Node major ships a module the
    // functions cannot load. So the deploy itself must run on the functions' Node.
    const functionRuntime = 'nodejs22.x';
    const deployingNode = process.versions.node;
    if (deployingNode.split('.')[0] !== '22') {
      throw new Error(`deploy from Node 22 (this is Node ${deployingNode}): the functions run on ${functionRuntime}, and isolated-vm's native binary is installed for the Node that runs the deploy`);
    }
    const cfg = parsed.data;
    const gpuInstance = /^[gp]\d+[a-z]*\./.test(cfg.ESOPT_TRAINER_INSTANCE_TYPE) && !/^g\d+g\./.test(cfg.ESOPT_TRAINER_INSTANCE_TYPE);
    const provider = cfg.ESOPT_TRAINER_PROVIDER ?? (gpuInstance ? 'cuda' : 'cpu');
    const port = cfg.ESOPT_INFERENCE_PORT;
    // What an episode costs, one JSON for the functions (ESOPT_COST_PRICES) and the box (stack/prices.json in
    // the bucket, read at start, so new prices never replace the instance): the instance type's measured decode
    // rate when recorded, else the default measurement, which the `costBasis` output names.
    const { measuredPrices, throughputBasis } = await import('./trainer/fanout/measured-prices.ts');
    let prices;
    try {
      prices = measuredPrices(cfg.ESOPT_COST_PRICES, cfg.ESOPT_TRAINER_INSTANCE_TYPE);
    } catch (err) {
      throw new Error(`invalid deploy settings: ESOPT_COST_PRICES: ${err instanceof z.ZodError ? z.prettifyError(err) : (err as Error).message}`);
    }
    const pricesJson = JSON.stringify(prices);
    const basis = throughputBasis(cfg.ESOPT_TRAINER_INSTANCE_TYPE);
    const costBasis = 'gpuSecondsPerToken' in cfg.ESOPT_COST_PRICES ? 'ESOPT_COST_PRICES' : basis.fallback ? `${basis.instanceType}/${basis.model} (no measurement recorded for ${cfg.ESOPT_TRAINER_INSTANCE_TYPE})` : basis.instanceType;

    // isolated-vm needs V8 started without Node's startup snapshot on Node >= 20 (its README); the Episode
    // function runs the heuristic sandbox, and Lambda's Node reads its flags from NODE_OPTIONS, which allows this one.
    const isolatedVmNodeOptions = '--no-node-snapshot';

    // Two tokens: the boxes' inference port (and the Episode function, which sends it) holds TrainerToken, the
    // Api function ApiToken, so that neither a box nor the Episode function (which runs Chromium on pages of
    // users' choosing) holds what opens the API, and an API caller cannot call the inference port.
    const token = new sst.Secret('TrainerToken');
    const apiToken = new sst.Secret('ApiToken');
    // Versioned: an overwrite or a delete (the trainer role may delete) keeps the previous version, which the
    // lifecycle below removes after ESOPT_NONCURRENT_DAYS.
    const bucket = new sst.aws.Bucket('Runs', { versioning: true });
    // What accumulates: superseded versions, the box artifacts of earlier deploys, idempotency records and
    // claims (by prefix), and evaluation transcripts (by their tag: no prefix names them). A run's old
    // checkpoints are the trainer's to prune (RunConfig.checkpointKeep); rewards, logs and manifests stay.
    new aws.s3.BucketLifecycleConfigurationV2('RunsLifecycle', {
      bucket: bucket.name,
      rules: [
        { id: 'noncurrent-versions', status: 'Enabled', filter: {}, noncurrentVersionExpiration: { noncurrentDays: cfg.ESOPT_NONCURRENT_DAYS } },
        { id: 'incomplete-uploads', status: 'Enabled', filter: {}, abortIncompleteMultipartUpload: { daysAfterInitiation: 2 } },
        // A box downloads its artifact at first boot only (its user data runs once); later deploys upload new keys.
        { id: 'old-artifacts', status: 'Enabled', filter: { prefix: 'artifacts/' }, expiration: { days: cfg.ESOPT_ARTIFACT_DAYS } },
        // An Idempotency-Key answers retries for a day (docs/API.md); a claim only needs to outlive its queue entry.
        { id: 'idempotency-records', status: 'Enabled', filter: { prefix: 'idempotency/' }, expiration: { days: 7 } },
        // shared/keys.ts's retentionTags.transcript, which the Episode function puts on every transcript.
        { id: 'transcripts', status: 'Enabled', filter: { tag: { key: 'esopt-retention', value: 'transcript' } }, expiration: { days: cfg.ESOPT_TRANSCRIPT_DAYS } },
      ],
    });
    /** Object ARNs in the runs bucket, one per key pattern. */
    const objects = (...patterns: string[]) => patterns.map((p) => $interpolate`${bucket.arn}/${p}`);

    // The trainer box. Its token is read from SSM at boot, so it never sits in the user data.
    const tokenParameter = new aws.ssm.Parameter('TrainerTokenParameter', {
      name: `/esopt/${$app.stage}/trainer-token`,
      type: 'SecureString',
      value: token.value,
    });
    // Queued evaluations' endpoint keys: SSM SecureStrings (Advanced tier, with an Expiration policy) under one
    // path, one per evaluation; the Api function writes them, the Episode function reads them, the box deletes them.
    const evaluationKeysPath = `/esopt/${$app.stage}/eval-keys`;
    const evaluationKeys = $interpolate`arn:${aws.getPartitionOutput({}).partition}:ssm:${cfg.ESOPT_AWS_REGION}:${aws.getCallerIdentityOutput({}).accountId}:parameter${evaluationKeysPath}/*`;
    const trainerRole = new aws.iam.Role('TrainerRole', {
      assumeRolePolicy: JSON.stringify({
        Version: '2012-10-17',
        Statement: [{ Effect: 'Allow', Principal: { Service: 'ec2.amazonaws.com' }, Action: 'sts:AssumeRole' }],
      }),
    });
    new aws.iam.RolePolicy('TrainerPolicy', {
      role: trainerRole.id,
      policy: $jsonStringify({
        Version: '2012-10-17',
        Statement: [
          // The trainer reads the whole bucket (runs, queued work, pushed models and suites, the artifact it boots
          // from) but writes only what it owns: runs (manifests, updates, checkpoints, logs, statuses, exports, an
          // evaluation's episodes), evaluations' statuses and plans, the queue and the claims it takes and clears,
          // its certificate and active run, and its own boot state. Never `stack/` or `artifacts/`, which every
          // box installs at boot, nor `models/`.
          { Effect: 'Allow', Action: ['s3:GetObject'], Resource: [$interpolate`${bucket.arn}/*`] },
          {
            Effect: 'Allow',
            Action: ['s3:PutObject', 's3:DeleteObject'],
            Resource: ['runs/*', 'evaluations/*', 'queue/*', 'claims/*', 'trainer/*', 'boxes/trainer/boot.json'].map((p) => $interpolate`${bucket.arn}/${p}`),
          },
          { Effect: 'Allow', Action: ['s3:ListBucket'], Resource: [bucket.arn] },
          { Effect: 'Allow', Action: ['ssm:GetParameter'], Resource: [tokenParameter.arn] },
          // An evaluation's key is deleted when the evaluation ends; the box never reads it.
          { Effect: 'Allow', Action: ['ssm:DeleteParameter'], Resource: [evaluationKeys] },
        ],
      }),
    });
    // Session Manager is the way onto a box (no key pair, no SSH port): what its agent calls, and no more. Not
    // AWS's AmazonSSMManagedInstanceCore, whose ssm:GetParameter(s) on every parameter would let a box read
    // every queued evaluation's endpoint key (the least-privilege test resolves that policy to show it).
    const sessionManagerPolicy = JSON.stringify({
      Version: '2012-10-17',
      Statement: [
        {
          Effect: 'Allow',
          Action: [
            'ssm:UpdateInstanceInformation',
            'ssmmessages:CreateControlChannel',
            'ssmmessages:CreateDataChannel',
            'ssmmessages:OpenControlChannel',
            'ssmmessages:OpenDataChannel',
            'ec2messages:AcknowledgeMessage',
            'ec2messages:DeleteMessage',
            'ec2messages:FailMessage',
            'ec2messages:GetEndpoint',
            'ec2messages:GetMessages',
            'ec2messages:SendReply',
          ],
          Resource: ['*'],
        },
      ],
    });
    new aws.iam.RolePolicy('TrainerSessionManagerPolicy', { role: trainerRole.id, policy: sessionManagerPolicy });
    // The boxes' service logs (pino lines, shipped by the service itself: trainer/cloud/box/cloudwatch-log-stream.ts),
    // one stream per box; each box may only create streams and put events in this group.
    const boxLogs = new aws.cloudwatch.LogGroup('BoxLogs', { name: `/esopt/${$app.stage}/boxes`, retentionInDays: cfg.ESOPT_LOG_DAYS });
    const boxLogsPolicy = $jsonStringify({
      Version: '2012-10-17',
      Statement: [{ Effect: 'Allow', Action: ['logs:CreateLogStream', 'logs:PutLogEvents'], Resource: [$interpolate`${boxLogs.arn}:*`] }],
    });
    new aws.iam.RolePolicy('TrainerLogsPolicy', { role: trainerRole.id, policy: boxLogsPolicy });
    const trainerProfile = new aws.iam.InstanceProfile('TrainerProfile', { role: trainerRole.name });
    // Open to the world unless narrowed: the Episode function calls from Lambda's changing addresses.
    const cidrs = cfg.ESOPT_INFERENCE_CIDRS.length ? cfg.ESOPT_INFERENCE_CIDRS : ['0.0.0.0/0', '::/0'];
    const v4 = cidrs.filter((c) => !c.includes(':'));
    const v6 = cidrs.filter((c) => c.includes(':'));
    const inferenceSources = { ...(v4.length ? { cidrBlocks: v4 } : {}), ...(v6.length ? { ipv6CidrBlocks: v6 } : {}) };
    const trainerSecurityGroup = new aws.ec2.SecurityGroup('TrainerSecurityGroup', {
      description: `esopt inference port ${port}`,
      ingress: [{ protocol: 'tcp', fromPort: port, toPort: port, ...inferenceSources }],
      egress: [{ protocol: '-1', fromPort: 0, toPort: 0, cidrBlocks: ['0.0.0.0/0'] }],
    });
    // NVIDIA drivers preinstalled; esopt's onnxruntime-node runs on it.
    const ami =
      cfg.ESOPT_TRAINER_AMI ??
      aws.ec2.getAmiOutput({
        mostRecent: true,
        owners: ['amazon'],
        filters: [{ name: 'name', values: ['Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)*'] }],
      }).id;
    // A fixed address, known before the box exists: the Episode function is told it, and the box is told the function.
    const address = new aws.ec2.Eip('TrainerAddress', { domain: 'vpc', tags: { Name: `esopt-${$app.stage}-trainer` } });
    // HTTPS: the box makes its certificate at start and publishes it in the bucket; the Episode function pins it.
    const trainerUrl = $interpolate`https://${address.publicIp}:${port}/v1`;
    // The replica boxes' fixed addresses: each announces its certificate under the run it follows, for the pin.
    const replicas = Array.from({ length: cfg.ESOPT_REPLICAS - 1 }, (_, i) => {
      const id = `replica-${i + 1}`;
      const replicaAddress = new aws.ec2.Eip(`ReplicaAddress${i + 1}`, { domain: 'vpc', tags: { Name: `esopt-${$app.stage}-${id}` } });
      return { id, n: i + 1, address: replicaAddress, url: $interpolate`https://${replicaAddress.publicIp}:${port}/v1` };
    });
    // id=url pairs: the Episode function sends the token to these origins only, each pinned to its own box's announcement.
    const replicaUrls = replicas.reduce<SstOutput<string> | undefined>((all, r) => (all ? $interpolate`${all},${r.id}=${r.url}` : $interpolate`${r.id}=${r.url}`), undefined);

    // The Episode function: writes its rewards, reads manifests, and nothing else (no bucket link: a
    // link would grant s3:* on the whole bucket).
    const episode = new sst.aws.Function('Episode', {
      handler: 'functions/episode.handler',
      runtime: functionRuntime,
      // Memory and /tmp from the rehearsal's measured peaks with at least a 2× margin (docs/CLOUD.md, "Sizing
      // the functions"); /tmp holds the inflated Chromium, and 512 MB is what Lambda gives without charge.
      memory: `${cfg.ESOPT_EPISODE_MEMORY_MB} MB`,
      storage: '512 MB',
      timeout: `${cfg.ESOPT_EPISODE_TIMEOUT_S} seconds`,
      concurrency: { reserved: cfg.ESOPT_EPISODE_CONCURRENCY },
      // Installed next to the bundle, not bundled: the heuristic environment's isolate (a native module), and
      // the web environment's browser: the Lambda build of Chromium (brotli-packed, inflated to /tmp on first
      // use; environments/web/chromium-executable.ts picks it on Lambda by itself) with playwright-core, which drives it.
      // 113 MB unzipped in all (test/cloud/episode-lambda-chromium.test.ts), within Lambda's 250 MB: SST uploads the
      // ~83 MB zip to S3 and creates the function from there, so the 50 MB direct-upload limit does not apply.
      nodejs: { install: ['isolated-vm', '@sparticuz/chromium', 'playwright-core'] },
      environment: {
        NODE_OPTIONS: isolatedVmNodeOptions,
        ESOPT_BUCKET: bucket.name,
        ESOPT_TRAINER_URL: trainerUrl,
        ...(replicaUrls ? { ESOPT_REPLICA_URLS: replicaUrls } : {}),
        // From the parameter, not the secret: a rotation updates the parameter (which the box follows) before this.
        ESOPT_TRAINER_TOKEN: tokenParameter.value,
        ESOPT_COST_PRICES: pricesJson,
        ...(cfg.ESOPT_ENDPOINT_NETWORKS ? { ESOPT_ENDPOINT_NETWORKS: cfg.ESOPT_ENDPOINT_NETWORKS } : {}),
      },
      permissions: [
        // Get as well as Put on rewards: the duplicate check before an episode and the HEAD of a create-only write.
        { actions: ['s3:PutObject', 's3:GetObject'], resources: [$interpolate`${bucket.arn}/runs/*/iterations/*/rewards/*`] },
        // The transcripts of base-weights episodes, written create-only (hence the Get) next to their rewards.
        // Tagged on the way in (PutObject with tags needs PutObjectTagging): the lifecycle expires them by the tag.
        // Their screenshots too (an evaluation episode's replay), written and tagged the same way.
        { actions: ['s3:PutObject', 's3:PutObjectTagging', 's3:GetObject'], resources: [$interpolate`${bucket.arn}/runs/*/iterations/*/transcripts/*`, $interpolate`${bucket.arn}/runs/*/iterations/*/frames/*`] },
        // A pushed task folder (a MiniWoB++ folder), read by the manifest an episode's options pin: never written here.
        { actions: ['s3:GetObject'], resources: [$interpolate`${bucket.arn}/task-folders/manifests/*`, $interpolate`${bucket.arn}/task-folders/blobs/*`] },
        { actions: ['s3:GetObject'], resources: [$interpolate`${bucket.arn}/runs/*/iterations/*/manifest.json`] },
        // The trainer's certificate, which it pins on every call to the box (only the box's role may write it).
        { actions: ['s3:GetObject'], resources: [$interpolate`${bucket.arn}/trainer/certificate.json`] },
        // Each replica box's announcement (its address and certificate) under the run, pinned on every call to it.
        ...(replicas.length ? [{ actions: ['s3:GetObject'], resources: replicas.map((r) => $interpolate`${bucket.arn}/runs/*/replicas/${r.id}.json`) }] : []),
        // Key names only: without it S3 answers 403 instead of 404 for a record that does not exist yet.
        { actions: ['s3:ListBucket'], resources: [bucket.arn] },
        // A queued evaluation's endpoint key, decrypted with the AWS-managed key aws/ssm (no kms: statement needed).
        { actions: ['ssm:GetParameter'], resources: [evaluationKeys] },
      ],
    });

    // What the box runs is what this deploy uploads: the tree being deployed as a tarball named and checked
    // by its SHA-256 (trainer/cloud/box/box-artifact.ts); its dependencies are the lock file's, integrity-checked by npm ci.
    const { buildBoxArtifact } = await import('./trainer/cloud/box/box-artifact.ts');
    const artifact = buildBoxArtifact(process.cwd());
    new aws.s3.BucketObjectv2('CostPrices', { bucket: bucket.name, key: 'stack/prices.json', content: pricesJson, contentType: 'application/json' });
    const artifactObject = new aws.s3.BucketObjectv2('TrainerArtifact', {
      bucket: bucket.name,
      key: artifact.key,
      source: new $util.asset.FileAsset(artifact.path),
      contentType: 'application/gzip',
    });
    // Which artifact the boxes run: read at boot and before each service start (box-boot.sh), and by the
    // trainer box, which hands its run over at an iteration boundary when it changes (trainer-box.ts).
    const artifactPointer = new aws.s3.BucketObjectv2('ArtifactPointer', {
      bucket: bucket.name,
      key: 'stack/artifact.json',
      content: $jsonStringify({ key: artifactObject.key, sha256: artifact.sha256 }),
      contentType: 'application/json',
    });
    // A box's boot is trainer/cloud/box/box-boot.sh (retries, the pinned Node, its state in boxes/<box>/boot.json),
    // carried whole in the user data after the variables that name this stack; the rehearsal runs the same text.
    const { readFileSync } = await import('node:fs');
    const bootScript = readFileSync('trainer/cloud/box/box-boot.sh', 'utf8').replace(/^#![^\n]*\n/, '');
    /** Single-quoted for bash: the values are names, keys, URLs and flags, never a quote. */
    const bootVariable = (name: string, value: SstInput<string>) => $interpolate`ESOPT_BOOT_${name}='${value}'\n`;
    const userDataFor = (box: string, service: string, description: string, args: SstInput<string>) =>
      $interpolate`#!/bin/bash
${bootVariable('BOX', box)}${bootVariable('REGION', cfg.ESOPT_AWS_REGION)}${bootVariable('BUCKET', bucket.name)}${bootVariable('TOKEN_PARAMETER', tokenParameter.name)}${bootVariable('EPISODE_FUNCTION', episode.name)}${bootVariable('SERVICE', service)}${bootVariable('DESCRIPTION', description)}${bootVariable('ARGS', args)}${bootVariable('PROVIDER', provider)}${bootVariable('LOG_GROUP', boxLogs.name)}${bootVariable('STOP_TIMEOUT_S', String(cfg.ESOPT_EPISODE_TIMEOUT_S + 120))}${bootScript}`;
    const serving = `--host 0.0.0.0 --port ${port}`;
    const userData = userDataFor(
      'trainer',
      'esopt-trainer-box',
      'esopt trainer box: runs the runs and evaluations queued in the bucket',
      // The old token stays accepted as long as an invocation that started with it may still run.
      $interpolate`trainer-box --idle-minutes ${cfg.ESOPT_BOX_IDLE_MINUTES} --token-grace-s ${Math.max(600, cfg.ESOPT_EPISODE_TIMEOUT_S + 60)} ${serving} --public-url ${trainerUrl} --provider ${provider}${replicas.length ? ` --replicas ${cfg.ESOPT_REPLICAS}` : ''}`,
    );
    // Every box (trainer and replicas): the same instance type, image, disk and port behind one security group.
    const box = (name: string, profile: { name: SstOutput<string> }, userData: SstOutput<string>, tag: string) =>
      new aws.ec2.Instance(name, {
        instanceType: cfg.ESOPT_TRAINER_INSTANCE_TYPE,
        ami,
        iamInstanceProfile: profile.name,
        vpcSecurityGroupIds: [trainerSecurityGroup.id],
        // Boot downloads Node and esopt's dependencies before the fixed address is attached.
        associatePublicIpAddress: true,
        // Encrypted whatever the account's EBS default: the disk holds θ, checkpoints and the model cache.
        rootBlockDevice: { volumeSize: cfg.ESOPT_TRAINER_DISK_GB, volumeType: 'gp3', encrypted: true },
        metadataOptions: { httpTokens: 'required' },
        ...(cfg.ESOPT_TRAINER_ZONE ? { availabilityZone: cfg.ESOPT_TRAINER_ZONE } : {}),
        userData,
        // The user data names the stack and carries the boot script, never the code: a code update changes the
        // pointer, not the instance, and a box is replaced only when its own settings change.
        userDataReplaceOnChange: true,
        tags: { Name: `esopt-${$app.stage}-${tag}` },
      }, { dependsOn: [artifactPointer], ...(cfg.ESOPT_TRAINER_AMI ? {} : { ignoreChanges: ['ami'] }) });
    const trainer = box('Trainer', trainerProfile, userData, 'trainer');
    const instances = [{ name: 'Trainer', instance: trainer }];
    new aws.ec2.EipAssociation('TrainerAddressAssociation', { instanceId: trainer.id, allocationId: address.allocationId });
    // The idle stop: the trainer box may stop its own instance, nothing else (the Api starts it again).
    new aws.iam.RolePolicy('TrainerIdleStopPolicy', {
      role: trainerRole.id,
      policy: $jsonStringify({ Version: '2012-10-17', Statement: [{ Effect: 'Allow', Action: ['ec2:StopInstances'], Resource: [trainer.arn] }] }),
    });

    // The replica boxes: the trainer's instance type and port behind the same security group, each with a role
    // of its own that reads the runs and writes only its own announcement and θ reports (never another box's).
    for (const r of replicas) {
      const role = new aws.iam.Role(`ReplicaRole${r.n}`, {
        assumeRolePolicy: JSON.stringify({
          Version: '2012-10-17',
          Statement: [{ Effect: 'Allow', Principal: { Service: 'ec2.amazonaws.com' }, Action: 'sts:AssumeRole' }],
        }),
      });
      new aws.iam.RolePolicy(`ReplicaPolicy${r.n}`, {
        role: role.id,
        policy: $jsonStringify({
          Version: '2012-10-17',
          Statement: [
            // The run it follows (config, manifests, updates, checkpoints, log, status), which run that is, the
            // pushed model the run names (manifest and files, `esopt models push`), and the artifact it boots from.
            { Effect: 'Allow', Action: ['s3:GetObject'], Resource: [$interpolate`${bucket.arn}/runs/*`, $interpolate`${bucket.arn}/trainer/active-run.json`, $interpolate`${bucket.arn}/models/*`, $interpolate`${bucket.arn}/artifacts/*`, $interpolate`${bucket.arn}/stack/artifact.json`] },
            { Effect: 'Allow', Action: ['s3:ListBucket'], Resource: [bucket.arn] },
            // Its own announcement and θ reports, and its own boot state (trainer/cloud/box/box-boot.sh).
            { Effect: 'Allow', Action: ['s3:PutObject'], Resource: [$interpolate`${bucket.arn}/runs/*/replicas/${r.id}.json`, $interpolate`${bucket.arn}/runs/*/replica-reports/*/${r.id}.json`, $interpolate`${bucket.arn}/boxes/${r.id}/boot.json`] },
            { Effect: 'Allow', Action: ['ssm:GetParameter'], Resource: [tokenParameter.arn] },
          ],
        }),
      });
      new aws.iam.RolePolicy(`ReplicaSessionManagerPolicy${r.n}`, { role: role.id, policy: sessionManagerPolicy });
      new aws.iam.RolePolicy(`ReplicaLogsPolicy${r.n}`, { role: role.id, policy: boxLogsPolicy });
      const profile = new aws.iam.InstanceProfile(`ReplicaProfile${r.n}`, { role: role.name });
      const userData = userDataFor(
        r.id,
        'esopt-replica-box',
        `esopt ${r.id}: follows the run the trainer box trains and serves its share of the members`,
        $interpolate`replica-box --id ${r.id} --token-grace-s ${Math.max(600, cfg.ESOPT_EPISODE_TIMEOUT_S + 60)} ${serving} --public-url ${r.url} --provider ${provider}`,
      );
      const instance = box(`Replica${r.n}`, profile, userData, r.id);
      new aws.ec2.EipAssociation(`ReplicaAddressAssociation${r.n}`, { instanceId: instance.id, allocationId: r.address.allocationId });
      instances.push({ name: `Replica${r.n}`, instance });
    }

    // The trainer box (`esopt trainer-box`, `esopt train --cloud`) fans episodes out to the Episode function: invoke it, nothing else.
    new aws.iam.RolePolicy('TrainerInvokePolicy', {
      role: trainerRole.id,
      policy: $jsonStringify({
        Version: '2012-10-17',
        Statement: [{ Effect: 'Allow', Action: ['lambda:InvokeFunction'], Resource: [episode.arn] }],
      }),
    });

    const api = new sst.aws.Function('Api', {
      handler: 'functions/api.handler',
      runtime: functionRuntime,
      // 512 MB buys CPU (Lambda's share grows with memory) for cold starts, well past the measured peak (docs/CLOUD.md).
      memory: '512 MB',
      timeout: '30 seconds',
      concurrency: { reserved: cfg.ESOPT_API_CONCURRENCY },
      // The function URL is made below, not by SST: SST's grants lambda:InvokeFunction to every principal
      // unconditionally, which lets any AWS account invoke the function directly, past the URL.
      // Validating a run config loads its environment's definition but never runs an episode, and the heuristic
      // sandbox imports isolated-vm on first use: left out of the bundle (a native module cannot be bundled)
      // and not installed, so the Api function ships and loads no native code.
      nodejs: { esbuild: { external: ['isolated-vm'] } },
      // Files the API reads at run time, which a bundle does not carry: the dashboard, read beside the code
      // that serves it (./dashboard/ of dashboard-routes.ts, and of bundle.mjs at the package's root), and
      // the uPlot and Swagger UI files it resolves with require.resolve, copied to the same paths under
      // node_modules so that the same resolution finds them (only these files: swagger-ui-dist would also
      // install @scarf/scarf, whose install script reports to a third party). trainer/dev/rehearsal/sst-build.ts
      // builds the package and test/cloud/sst-build.test.ts serves every page and asset from it.
      copyFiles: [
        { from: 'functions/http-api/dashboard', to: 'dashboard' },
        { from: 'node_modules/uplot/dist/uPlot.iife.min.js' },
        { from: 'node_modules/uplot/dist/uPlot.min.css' },
        { from: 'node_modules/swagger-ui-dist/swagger-ui.css' },
        { from: 'node_modules/swagger-ui-dist/swagger-ui-bundle.js' },
      ],
      // Not linked to the bucket (a link grants s3:*): exactly what the API app does with it.
      environment: {
        ESOPT_BUCKET: bucket.name,
        ESOPT_TOKEN: apiToken.value,
        ESOPT_EVALUATION_KEYS: evaluationKeysPath,
        ESOPT_TRAINER_INSTANCE: trainer.id,
        ESOPT_COST_PRICES: pricesJson,
        ESOPT_API_RATE_PER_SECOND: String(cfg.ESOPT_API_RATE_PER_SECOND),
        ESOPT_API_RATE_BURST: String(cfg.ESOPT_API_RATE_BURST),
        ...(cfg.ESOPT_MAX_RUN_COST_USD !== undefined ? { ESOPT_MAX_RUN_COST_USD: String(cfg.ESOPT_MAX_RUN_COST_USD) } : {}),
        ...(cfg.ESOPT_MAX_EVALUATION_COST_USD !== undefined ? { ESOPT_MAX_EVALUATION_COST_USD: String(cfg.ESOPT_MAX_EVALUATION_COST_USD) } : {}),
        ...(cfg.ESOPT_ENDPOINT_NETWORKS ? { ESOPT_ENDPOINT_NETWORKS: cfg.ESOPT_ENDPOINT_NETWORKS } : {}),
      },
      permissions: [
        // Reads: runs (configs, statuses, metrics, checkpoints, rewards, transcripts) and evaluations for every
        // GET; queue entries and idempotency records for the HEAD of a create-only write.
        // GET /boxes: each box's boot state. The model catalog's names and manifests, to pin a named model (never its
        // files); the task suites', the instructions' and the task folders' names and manifests, to pin those a run or
        // evaluation names (a folder's files never: the Episode function reads those).
        {
          actions: ['s3:GetObject'],
          resources: objects('runs/*', 'evaluations/*', 'queue/*', 'idempotency/*', 'boxes/*/boot.json', 'models/names/*', 'models/manifests/*', 'suites/names/*', 'suites/manifests/*', 'instructions/names/*', 'instructions/manifests/*', 'task-folders/names/*', 'task-folders/manifests/*'),
        },
        // Writes: what POST /runs, POST /runs/{id}/stop and POST /evaluations create, a model export's first
        // status (GET /runs/{id}/model), the queue entry for the trainer box, and the Idempotency-Key records.
        // The exported archive itself is downloaded by a URL this role presigns (its GetObject on runs/*).
        {
          actions: ['s3:PutObject'],
          resources: objects('runs/*/config.json', 'runs/*/status.json', 'runs/*/stop.json', 'runs/*/exports/*/status.json', 'evaluations/*/request.json', 'evaluations/*/status.json', 'queue/*', 'idempotency/*'),
        },
        // An idempotency claim whose request failed is released.
        { actions: ['s3:DeleteObject'], resources: objects('idempotency/*') },
        { actions: ['s3:ListBucket'], resources: [bucket.arn] },
        // A keyed evaluation's endpoint key, stored for the Episode function; deleted again if it cannot be queued.
        { actions: ['ssm:PutParameter', 'ssm:DeleteParameter'], resources: [evaluationKeys] },
        // Queued work starts the trainer box when it stopped itself idle: that instance, and only starting it.
        { actions: ['ec2:StartInstances'], resources: [trainer.arn] },
      ],
    });

    // The function URL is the only way in: InvokeFunctionUrl for everyone (the app checks the bearer token), and
    // InvokeFunction only where the call came through the URL (both are required of URLs made since October 2025).
    const apiUrl = new aws.lambda.FunctionUrl('ApiUrl', { functionName: api.name, authorizationType: 'NONE' });
    new aws.lambda.Permission('ApiUrlInvokeUrl', { function: api.name, action: 'lambda:InvokeFunctionUrl', principal: '*', functionUrlAuthType: 'NONE' });
    new aws.lambda.Permission('ApiUrlInvokeFunction', { function: api.name, action: 'lambda:InvokeFunction', principal: '*', invokedViaFunctionUrl: true });

    // Alarms, to one topic (mailed to ESOPT_ALARM_EMAIL when set): any Lambda error or throttle in five minutes,
    // a box failing its EC2 status checks (a stopped box sends no data, which is not a failure), and any
    // error-level line (pino level ≥ 50) in the boxes' service logs.
    const alarms = new aws.sns.Topic('Alarms', {});
    if (cfg.ESOPT_ALARM_EMAIL) new aws.sns.TopicSubscription('AlarmEmail', { topic: alarms.arn, protocol: 'email', endpoint: cfg.ESOPT_ALARM_EMAIL });
    const alarm = (name: string, description: string, metric: Record<string, unknown>) =>
      new aws.cloudwatch.MetricAlarm(name, {
        alarmDescription: description,
        comparisonOperator: 'GreaterThanOrEqualToThreshold',
        threshold: 1,
        treatMissingData: 'notBreaching',
        alarmActions: [alarms.arn],
        okActions: [alarms.arn],
        ...metric,
      });
    for (const [fn, fnName] of [[episode, 'Episode'], [api, 'Api']] as const) {
      for (const metricName of ['Errors', 'Throttles']) {
        alarm(`${fnName}${metricName}`, `esopt ${$app.stage}: the ${fnName} function's ${metricName.toLowerCase()} (esopt cloud logs ${fnName.toLowerCase()})`, {
          namespace: 'AWS/Lambda', metricName, dimensions: { FunctionName: fn.name }, statistic: 'Sum', period: 300, evaluationPeriods: 1,
        });
      }
    }
    for (const { name, instance } of instances) {
      alarm(`${name}StatusCheck`, `esopt ${$app.stage}: the ${name.toLowerCase()} box fails its EC2 status checks`, {
        namespace: 'AWS/EC2', metricName: 'StatusCheckFailed', dimensions: { InstanceId: instance.id }, statistic: 'Maximum', period: 60, evaluationPeriods: 3,
      });
    }
    const boxErrorMetric = { namespace: `esopt/${$app.stage}`, name: 'BoxServiceErrors', value: '1' };
    new aws.cloudwatch.LogMetricFilter('BoxServiceErrors', { logGroupName: boxLogs.name, pattern: '{ $.level >= 50 }', metricTransformation: boxErrorMetric });
    alarm('BoxServiceErrors', `esopt ${$app.stage}: an error in a box's service log (esopt cloud logs box)`, {
      namespace: boxErrorMetric.namespace, metricName: boxErrorMetric.name, statistic: 'Sum', period: 300, evaluationPeriods: 1,
    });

    return {
      boxLogGroup: boxLogs.name,
      episodeLogGroup: $interpolate`/aws/lambda/${episode.name}`,
      apiLogGroup: $interpolate`/aws/lambda/${api.name}`,
      alarmTopic: alarms.arn,
      bucket: bucket.name,
      episodeFunction: episode.name,
      apiUrl: apiUrl.functionUrl,
      trainerUrl,
      trainerInstance: trainer.id,
      replicaUrls: replicas.map((r) => r.url),
      artifactSha256: artifact.sha256,
      costBasis,
    };
  },
});
