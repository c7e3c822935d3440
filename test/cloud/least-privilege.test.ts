/**
 * Least privilege, from sst.config.ts evaluated offline: every role's statements listed in full, and the
 * Api function's shown to be enough by running the API app over a store that enforces them (each get,
 * put, list and delete checked against the statements the way S3 checks a request; a create-only put
 * also needs GetObject, for its HEAD).
 */
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createCloudApp } from '../../functions/http-api/cloud-app.ts';
import { keys } from '../../shared/keys.ts';
import { readNamedModel } from '../../shared/model-catalog.ts';
import { pushModel } from '../../trainer/training/model-store/push-model.ts';
import { sudoku } from '../../environments/sudoku/definition.ts';
import { pushSuite } from '../../environments/task-suites/push-suite.ts';
import { materializeTaskFolder, pushTaskFolder, readTaskFolderManifest } from '../../environments/web/task-folder-catalog.ts';
import { publishInstructions } from '../../shared/instructions-catalog.ts';
import type { ObjectStore, PutOptions, StreamOptions } from '../../shared/ports/object-store.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import type { SecretStore } from '../../shared/ports/secret-store.ts';
import { tinyRunConfig } from '../api/helpers.ts';
import { RunConfig } from '../../shared/schemas/index.ts';
import { ReplicaBox } from '../../trainer/cloud/box/replica-box.ts';
import { createTlsIdentity } from '../../trainer/serving/tls-identity.ts';
import { MemorySecretStore } from './helpers/memory-secrets.ts';
import { evaluate, render } from '../../trainer/dev/rehearsal/sst-stack.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';
import { STACK_CAPS } from './helpers/stack-caps.ts';

interface Statement {
  actions: string[];
  resources: string[];
}

/**
 * AWS managed policies by their documented statements (the IAM console's JSON, "AWS managed policy
 * reference"), so an attachment is checked like an inline policy; one not listed here fails the test.
 */
const MANAGED_POLICIES: Record<string, Statement[]> = {
  AmazonSSMManagedInstanceCore: [
    {
      actions: ['ssm:DescribeAssociation', 'ssm:GetDeployablePatchSnapshotForInstance', 'ssm:GetDocument', 'ssm:DescribeDocument', 'ssm:GetManifest', 'ssm:GetParameter', 'ssm:GetParameters', 'ssm:ListAssociations', 'ssm:ListInstanceAssociations', 'ssm:PutInventory', 'ssm:PutComplianceItems', 'ssm:PutConfigurePackageResult', 'ssm:UpdateAssociationStatus', 'ssm:UpdateInstanceAssociationStatus', 'ssm:UpdateInstanceInformation'],
      resources: ['*'],
    },
    { actions: ['ssmmessages:CreateControlChannel', 'ssmmessages:CreateDataChannel', 'ssmmessages:OpenControlChannel', 'ssmmessages:OpenDataChannel'], resources: ['*'] },
    { actions: ['ec2messages:AcknowledgeMessage', 'ec2messages:DeleteMessage', 'ec2messages:FailMessage', 'ec2messages:GetEndpoint', 'ec2messages:GetMessages', 'ec2messages:SendReply'], resources: ['*'] },
  ],
};

/** What Session Manager's agent calls on a box, and no more (sst.config.ts's sessionManagerPolicy). */
const SESSION_MANAGER: Statement = {
  actions: ['ssm:UpdateInstanceInformation', 'ssmmessages:CreateControlChannel', 'ssmmessages:CreateDataChannel', 'ssmmessages:OpenControlChannel', 'ssmmessages:OpenDataChannel', 'ec2messages:AcknowledgeMessage', 'ec2messages:DeleteMessage', 'ec2messages:FailMessage', 'ec2messages:GetEndpoint', 'ec2messages:GetMessages', 'ec2messages:SendReply'],
  resources: ['*'],
};

const BUCKET = '${sst.aws.Bucket.Runs.arn}';
const MINIWOB = fileURLToPath(new URL('../fixtures/miniwob-protocol', import.meta.url));
const DEMO = fileURLToPath(new URL('../../models/sudoku-4x4-demo', import.meta.url));
/** The stage's evaluation keys (SSM parameters), in this account and region only. */
const EVALUATION_KEYS = 'arn:${aws.getPartition.partition}:ssm:us-east-1:${aws.getCallerIdentity.accountId}:parameter/esopt/test/eval-keys/*';
/** The trainer box's instance: the one the idle stop stops and the Api starts. */
const TRAINER_INSTANCE = '${aws.ec2.Instance.Trainer.arn}';
const parameterArn = (name: string) => `arn:\${aws.getPartition.partition}:ssm:us-east-1:\${aws.getCallerIdentity.accountId}:parameter${name}`;

async function roles(env: Record<string, string> = {}): Promise<Record<string, Statement[]>> {
  const { one, recorded } = await evaluate(env);
  const fn = (name: string) => {
    const args = one('sst.aws.Function', name).args as { permissions?: { actions: string[]; resources: unknown[] }[]; link?: unknown[] };
    expect(args.link ?? [], `${name} is linked to nothing (a link grants s3:*)`).toEqual([]);
    return (args.permissions ?? []).map((p) => ({ actions: p.actions, resources: p.resources.map(render) }));
  };
  const policy = (name: string) =>
    (JSON.parse(one('aws.iam.RolePolicy', name).args.policy as string) as { Statement: { Action: string[]; Resource: string[] }[] }).Statement.map((s) => ({ actions: s.Action, resources: s.Resource }));
  // Managed policies attached to a role, resolved to their documented statements.
  const managed = (role: string) =>
    recorded
      .filter((r) => r.type === 'aws.iam.RolePolicyAttachment' && render(r.args.role).includes(`aws.iam.Role.${role}.`))
      .flatMap((r) => {
        const name = render(r.args.policyArn).split('/').at(-1)!;
        const documented = MANAGED_POLICIES[name];
        if (!documented) throw new Error(`${role} has the managed policy ${name}, whose statements this test does not know: add them to MANAGED_POLICIES`);
        return documented;
      });
  const replicaRoles = recorded.filter((r) => r.type === 'aws.iam.Role' && r.name.startsWith('ReplicaRole')).map((r) => r.name);
  return {
    Episode: fn('Episode'),
    Api: fn('Api'),
    TrainerRole: [...policy('TrainerPolicy'), ...policy('TrainerInvokePolicy'), ...policy('TrainerIdleStopPolicy'), ...policy('TrainerSessionManagerPolicy'), ...managed('TrainerRole')],
    ...Object.fromEntries(replicaRoles.map((role) => [role, [...policy(role.replace('Role', 'Policy')), ...policy(role.replace('Role', 'SessionManagerPolicy')), ...managed(role)]])),
  };
}

/** Whether the statements allow `action` on `resource` (IAM's `*` matches any characters, `/` included). */
function allows(statements: Statement[], action: string, resource: string): boolean {
  const matches = (pattern: string) => new RegExp(`^${pattern.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^]*')}$`).test(resource);
  return statements.some((s) => s.actions.includes(action) && s.resources.some(matches));
}

/** An ObjectStore that answers AccessDenied for what the statements do not allow, and notes it. */
class EnforcingStore implements ObjectStore {
  readonly denied: string[] = [];
  constructor(
    readonly inner: ObjectStore,
    private readonly statements: Statement[],
  ) {}
  private check(action: string, resource: string) {
    if (allows(this.statements, action, resource)) return;
    this.denied.push(`${action} ${resource}`);
    throw new Error(`AccessDenied: ${action} on ${resource}`);
  }
  async get(key: string) {
    this.check('s3:GetObject', `${BUCKET}/${key}`);
    return this.inner.get(key);
  }
  async put(key: string, body: Uint8Array | string, options?: PutOptions) {
    if (options?.ifAbsent) this.check('s3:GetObject', `${BUCKET}/${key}`);
    this.check('s3:PutObject', `${BUCKET}/${key}`);
    // S3 asks for PutObjectTagging too when a PUT carries tags
    if (options?.tags) this.check('s3:PutObjectTagging', `${BUCKET}/${key}`);
    return this.inner.put(key, body, options);
  }
  async putFile(key: string, path: string, options?: PutOptions & StreamOptions) {
    if (options?.ifAbsent) this.check('s3:GetObject', `${BUCKET}/${key}`);
    this.check('s3:PutObject', `${BUCKET}/${key}`);
    if (options?.tags) this.check('s3:PutObjectTagging', `${BUCKET}/${key}`);
    return this.inner.putFile(key, path, options);
  }
  async getToFile(key: string, path: string, options?: StreamOptions) {
    this.check('s3:GetObject', `${BUCKET}/${key}`);
    return this.inner.getToFile(key, path, options);
  }
  async list(prefix: string) {
    this.check('s3:ListBucket', BUCKET);
    return this.inner.list(prefix);
  }
  async listObjects(prefix: string) {
    this.check('s3:ListBucket', BUCKET);
    return this.inner.listObjects(prefix);
  }
  async listChildren(prefix: string) {
    this.check('s3:ListBucket', BUCKET);
    return this.inner.listChildren(prefix);
  }
  async delete(key: string) {
    this.check('s3:DeleteObject', `${BUCKET}/${key}`);
    return this.inner.delete(key);
  }
}

/** A SecretStore that answers AccessDenied for what the statements do not allow (SSM checks the parameter's ARN). */
class EnforcingSecrets implements SecretStore {
  readonly denied: string[] = [];
  constructor(
    private readonly inner: SecretStore,
    private readonly statements: Statement[],
  ) {}
  private check(action: string, name: string) {
    if (allows(this.statements, action, parameterArn(name))) return;
    this.denied.push(`${action} ${name}`);
    throw new Error(`AccessDenied: ${action} on ${name}`);
  }
  async create(name: string, value: string, expiresAt: Date) {
    this.check('ssm:PutParameter', name);
    return this.inner.create(name, value, expiresAt);
  }
  async get(name: string) {
    this.check('ssm:GetParameter', name);
    return this.inner.get(name);
  }
  async delete(name: string) {
    this.check('ssm:DeleteParameter', name);
    return this.inner.delete(name);
  }
}

describe('least privilege', () => {
  it("lists every role's statements: no wildcard action, the functions' by key prefix", async () => {
    const all = await roles();
    expect(all).toEqual({
      Episode: [
        { actions: ['s3:PutObject', 's3:GetObject'], resources: [`${BUCKET}/runs/*/iterations/*/rewards/*`] },
        { actions: ['s3:PutObject', 's3:PutObjectTagging', 's3:GetObject'], resources: [`${BUCKET}/runs/*/iterations/*/transcripts/*`, `${BUCKET}/runs/*/iterations/*/frames/*`] },
        { actions: ['s3:GetObject'], resources: [`${BUCKET}/task-folders/manifests/*`, `${BUCKET}/task-folders/blobs/*`] },
        { actions: ['s3:GetObject'], resources: [`${BUCKET}/runs/*/iterations/*/manifest.json`] },
        { actions: ['s3:GetObject'], resources: [`${BUCKET}/trainer/certificate.json`] },
        { actions: ['s3:ListBucket'], resources: [BUCKET] },
        { actions: ['ssm:GetParameter'], resources: [EVALUATION_KEYS] },
      ],
      Api: [
        {
          actions: ['s3:GetObject'],
          resources: ['runs/*', 'evaluations/*', 'queue/*', 'idempotency/*', 'boxes/*/boot.json', 'models/names/*', 'models/manifests/*', 'suites/names/*', 'suites/manifests/*', 'instructions/names/*', 'instructions/manifests/*', 'task-folders/names/*', 'task-folders/manifests/*'].map((p) => `${BUCKET}/${p}`),
        },
        {
          actions: ['s3:PutObject'],
          resources: ['runs/*/config.json', 'runs/*/status.json', 'runs/*/stop.json', 'runs/*/exports/*/status.json', 'evaluations/*/request.json', 'evaluations/*/status.json', 'queue/*', 'idempotency/*'].map((p) => `${BUCKET}/${p}`),
        },
        { actions: ['s3:DeleteObject'], resources: [`${BUCKET}/idempotency/*`] },
        { actions: ['s3:ListBucket'], resources: [BUCKET] },
        { actions: ['ssm:PutParameter', 'ssm:DeleteParameter'], resources: [EVALUATION_KEYS] },
        { actions: ['ec2:StartInstances'], resources: [TRAINER_INSTANCE] },
      ],
      TrainerRole: [
        { actions: ['s3:GetObject'], resources: [`${BUCKET}/*`] },
        { actions: ['s3:PutObject', 's3:DeleteObject'], resources: ['runs/*', 'evaluations/*', 'queue/*', 'claims/*', 'trainer/*', 'boxes/trainer/boot.json'].map((p) => `${BUCKET}/${p}`) },
        { actions: ['s3:ListBucket'], resources: [BUCKET] },
        { actions: ['ssm:GetParameter'], resources: ['${aws.ssm.Parameter.TrainerTokenParameter.arn}'] },
        { actions: ['ssm:DeleteParameter'], resources: [EVALUATION_KEYS] },
        { actions: ['lambda:InvokeFunction'], resources: ['${sst.aws.Function.Episode.arn}'] },
        { actions: ['ec2:StopInstances'], resources: [TRAINER_INSTANCE] },
        SESSION_MANAGER,
      ],
    });
    for (const [role, statements] of Object.entries(all)) {
      for (const s of statements) for (const a of s.actions) expect(a, role).not.toMatch(/\*/);
    }
    // The certificate the Episode function pins can be written by the trainer box's role alone.
    const certificate = `${BUCKET}/${keys.trainerCertificate()}`;
    expect(Object.keys(all).filter((role) => allows(all[role], 's3:PutObject', certificate))).toEqual(['TrainerRole']);
    // What every box installs at boot (the artifact and its pointer) and the pushed models: no role of the stack writes them.
    for (const key of [keys.artifactPointer(), 'artifacts/abc.tgz', 'stack/prices.json', 'models/blobs/sha256/' + 'a'.repeat(64)]) {
      for (const action of ['s3:PutObject', 's3:DeleteObject']) expect(Object.keys(all).filter((role) => allows(all[role], action, `${BUCKET}/${key}`)), `${action} ${key}`).toEqual([]);
    }
    // Session Manager on the boxes reads no parameter; the managed policy it replaced would have read every one.
    expect(allows(MANAGED_POLICIES.AmazonSSMManagedInstanceCore!, 'ssm:GetParameter', parameterArn('/esopt/test/eval-keys/eval-abc'))).toBe(true);
    // An evaluation's key: the Api writes it, the Episode function alone reads it, the box deletes it; nobody
    // reaches another stage's keys or the trainer token's parameter through these statements.
    const key = parameterArn('/esopt/test/eval-keys/eval-abc');
    const who = (action: string, resource = key) => Object.keys(all).filter((role) => allows(all[role], action, resource));
    expect(who('ssm:PutParameter')).toEqual(['Api']);
    expect(who('ssm:GetParameter')).toEqual(['Episode']);
    expect(who('ssm:DeleteParameter')).toEqual(['Api', 'TrainerRole']);
    for (const other of [parameterArn('/esopt/prod/eval-keys/eval-abc'), parameterArn('/esopt/test/trainer-token')]) {
      for (const action of ['ssm:PutParameter', 'ssm:GetParameter', 'ssm:DeleteParameter']) expect(who(action, other), `${action} ${other}`).toEqual([]);
    }
    // The idle stop and the start: the box stops its own instance, the Api starts it, and neither reaches any
    // other instance (a replica box's, or another stack's) nor may do anything else with EC2.
    expect(who('ec2:StopInstances', TRAINER_INSTANCE)).toEqual(['TrainerRole']);
    expect(who('ec2:StartInstances', TRAINER_INSTANCE)).toEqual(['Api']);
    const ec2 = Object.entries(all).flatMap(([role, statements]) => statements.filter((s) => s.actions.some((a) => a.startsWith('ec2:'))).map((s) => ({ role, ...s })));
    expect(ec2).toEqual([
      { role: 'Api', actions: ['ec2:StartInstances'], resources: [TRAINER_INSTANCE] },
      { role: 'TrainerRole', actions: ['ec2:StopInstances'], resources: [TRAINER_INSTANCE] },
    ]);
    const replicas = await roles({ ESOPT_REPLICAS: '2' });
    for (const action of ['ec2:StopInstances', 'ec2:StartInstances']) expect(Object.keys(replicas).filter((role) => allows(replicas[role], action, '${aws.ec2.Instance.Replica1.arn}'))).toEqual([]);
  });

  it('the Api app does everything it serves within its statements, and no more is allowed', async () => {
    const store = new EnforcingStore(new FsObjectStore(mkdtempSync(join(tmpdir(), 'esopt-iam-'))), (await roles()).Api);
    const memory = new MemorySecretStore();
    const secrets = new EnforcingSecrets(memory, (await roles()).Api);
    const app = createCloudApp({ ESOPT_BUCKET: 'esopt-runs', ESOPT_TOKEN: 'least-privilege-token-0123', ESOPT_EVALUATION_KEYS: '/esopt/test/eval-keys', ESOPT_COST_PRICES: JSON.stringify(measuredPrices()), ...STACK_CAPS }, store, (await import('pino')).pino({ level: 'silent' }), secrets);
    const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
      const res = await app.request(path, { method, headers: { authorization: 'Bearer least-privilege-token-0123', 'content-type': 'application/json', ...headers }, body: body === undefined ? undefined : JSON.stringify(body) });
      return { status: res.status, body: (await res.json().catch(() => null)) as any };
    };
    const run = await call('POST', '/runs', tinyRunConfig({ name: 'iam' }), { 'idempotency-key': 'iam-1' });
    expect(run.status).toBe(201);
    // A pushed model (pushed from outside the stack) is pinned from its name and manifest alone.
    const pushed = await pushModel(store.inner, DEMO, { name: 'demo' });
    const named = await call('POST', '/runs', tinyRunConfig({ name: 'iam-named', model: { name: 'demo' } }));
    expect(named.status).toBe(201);
    expect((await call('POST', '/evaluations', { model: { kind: 'base', model: { name: 'demo', manifest: pushed.manifestSha256 } }, environment: { name: 'sudoku', options: { size: 4 } }, tasks: { split: 'eval', count: 1 }, episodes: 1 })).status).toBe(202);
    // A task suite and instructions (pushed from outside the stack: `esopt tasks push`, `instructions push --cloud`)
    // are pinned from their names and manifests, by name for a run and by manifest for an evaluation.
    const options = sudoku.optionsSchema.parse({ size: 4, blanks: 2 });
    const suiteTasks = [...sudoku.sampleTasks('train', 6, 1, options), ...sudoku.sampleTasks('eval', 6, 1, options)].map((t) => JSON.stringify(t.task)).join('\n');
    const suite = (await pushSuite(store.inner, { name: 'iam-suite', environment: 'sudoku', text: suiteTasks })).record;
    const coach = (await publishInstructions(store.inner, 'iam-coach', { system: 'Check every row.\n\n{{environment}}', skills: [] })).record;
    const suiteRun = await call('POST', '/runs', tinyRunConfig({ name: 'iam-suite', tasks: { suite: 'iam-suite', trainPerIteration: 1, evalCount: 1 }, instructions: 'iam-coach' }));
    expect(suiteRun.status, JSON.stringify(suiteRun.body)).toBe(201);
    const suiteEvaluation = { model: { kind: 'base', model: { preset: 'tiny', seed: 0 } }, environment: { name: 'sudoku', options: { size: 4, blanks: 2 } }, tasks: { suite: { name: 'iam-suite', manifest: suite.manifestSha256 }, split: 'eval', count: 1 }, episodes: 1, instructions: { name: 'iam-coach', manifest: coach.manifestSha256 } };
    expect((await call('POST', '/evaluations', suiteEvaluation)).status).toBe(202);
    // A task folder (`esopt tasks push DIR --cloud`) is pinned from its name and manifest, its files never read here.
    const folder = (await pushTaskFolder(store.inner, 'iam-pages', MINIWOB)).record;
    const folderRun = await call('POST', '/runs', tinyRunConfig({ name: 'iam-pages', environment: { name: 'web', options: { miniwob: { folder: 'iam-pages' } } } }));
    expect(folderRun.status, JSON.stringify(folderRun.body)).toBe(201);

    // Read, never written: the suites and instructions are the user's to push.
    for (const key of [keys.suiteName('iam-suite'), keys.suiteManifest(suite.manifestSha256), keys.instructionsName('iam-coach'), keys.instructionsManifest(coach.manifestSha256)]) {
      for (const action of ['s3:PutObject', 's3:DeleteObject']) expect(allows((await roles()).Api, action, `${BUCKET}/${key}`), `${action} ${key}`).toBe(false);
    }
    expect((await call('POST', '/runs', tinyRunConfig({ name: 'iam' }), { 'idempotency-key': 'iam-1' })).body.id).toBe(run.body.id);
    for (const path of ['/runs', `/runs/${run.body.id}`, `/runs/${run.body.id}/metrics`, `/runs/${run.body.id}/checkpoints`]) expect((await call('GET', path)).status, path).toBe(200);
    // A model export: its status and the queue entry for the box (the box makes the archive).
    expect((await call('GET', `/runs/${run.body.id}/model?format=safetensors`)).status).toBe(202);
    expect((await call('POST', `/runs/${run.body.id}/stop`)).status).toBe(202);
    const evaluation = await call('POST', '/evaluations', { model: { kind: 'external', baseUrl: 'http://127.0.0.1:9/v1', model: 'x' }, environment: { name: 'sudoku', options: { size: 4 } }, tasks: { split: 'eval', count: 1 }, episodes: 1 });
    expect(evaluation.status).toBe(202);
    expect((await call('GET', '/evaluations')).status).toBe(200);
    expect((await call('GET', `/evaluations/${evaluation.body.id}`)).status).toBe(200);
    const keyed = await call('POST', '/evaluations', { model: { kind: 'external', baseUrl: 'https://api.example.com/v1', model: 'x', apiKey: 'sk-iam' }, environment: { name: 'sudoku', options: { size: 4 } }, tasks: { split: 'eval', count: 1 }, episodes: 1 });
    expect(keyed.status).toBe(202);
    expect([...memory.secrets.keys()]).toEqual([`/esopt/test/eval-keys/${keyed.body.id}`]);
    expect(store.denied).toEqual([]);
    expect(secrets.denied).toEqual([]);
    // It can store a key, not read one back.
    await expect(secrets.get(`/esopt/test/eval-keys/${keyed.body.id}`)).rejects.toThrow(/AccessDenied: ssm:GetParameter/);
    // What the trainer box and the Episode function write is out of the Api's reach.
    for (const key of [keys.manifest(run.body.id, 0), keys.reward(run.body.id, 0, 0, 't'), keys.checkpointWeights(run.body.id, 0), keys.workClaim('run', run.body.id), keys.evaluationPlan(evaluation.body.id), keys.modelExportArchive(run.body.id, 0, 'onnx')]) {
      await expect(store.put(key, '{}'), key).rejects.toThrow(/AccessDenied: s3:PutObject/);
    }
    await expect(store.delete(keys.config(run.body.id))).rejects.toThrow(/AccessDenied: s3:DeleteObject/);
    // The model store: the Api reads names and manifests, never a model's files, and writes none of it.
    const blob = keys.modelBlob((await readNamedModel(store.inner, 'demo'))!.manifest.files[0].sha256);
    await expect(store.get(blob)).rejects.toThrow(/AccessDenied: s3:GetObject/);
    for (const key of [keys.modelName('demo'), keys.modelManifest(pushed.manifestSha256), blob]) await expect(store.put(key, '{}'), key).rejects.toThrow(/AccessDenied: s3:PutObject/);
    // The same for a task folder: names and manifests read, its files neither read nor written.
    const blobKey = keys.taskFolderBlob((await readTaskFolderManifest(store.inner, folder.manifestSha256))!.files[0]!.sha256);
    await expect(store.get(blobKey)).rejects.toThrow(/AccessDenied: s3:GetObject/);
    for (const key of [keys.taskFolderName('iam-pages'), keys.taskFolderManifest(folder.manifestSha256), blobKey]) await expect(store.put(key, '{}'), key).rejects.toThrow(/AccessDenied: s3:PutObject/);
  });

  it("the Episode function reads a pushed task folder and writes an episode's screenshots within its statements", async () => {
    const store = new EnforcingStore(new FsObjectStore(mkdtempSync(join(tmpdir(), 'esopt-iam-'))), (await roles()).Episode);
    const { record } = await pushTaskFolder(store.inner, 'iam-pages', MINIWOB);
    const dir = await materializeTaskFolder(store, record.manifestSha256, mkdtempSync(join(tmpdir(), 'esopt-iam-pages-')));
    expect(readdirSync(join(dir, 'html', 'miniwob'))).toContain('click-word.html');
    await store.put(keys.frame('run-iam', 0, 'base', 'task-1', 'attempt-1', 0), new Uint8Array([137, 80, 78, 71]), { ifAbsent: true, contentType: 'image/png', tags: { esopt: 'transcript' } });
    expect(store.denied).toEqual([]);
    // The folder is the user's: the function writes none of it, and reads no name (only what a run pinned).
    await expect(store.put(keys.taskFolderManifest(record.manifestSha256), '{}')).rejects.toThrow(/AccessDenied: s3:PutObject/);
    await expect(store.get(keys.taskFolderName('iam-pages'))).rejects.toThrow(/AccessDenied: s3:GetObject/);
  });

  it('with replica boxes: each reads the runs and writes only its own announcement and θ reports; the Episode function reads their announcements', async () => {
    const all = await roles({ ESOPT_REPLICAS: '3' });
    expect(Object.keys(all)).toEqual(['Episode', 'Api', 'TrainerRole', 'ReplicaRole1', 'ReplicaRole2']);
    // The artifacts it installs (at boot and at each update) and the pointer that names the current one.
    const artifacts = [`${BUCKET}/artifacts/*`, `${BUCKET}/stack/artifact.json`];
    for (const n of [1, 2]) {
      expect(all[`ReplicaRole${n}`]).toEqual([
        { actions: ['s3:GetObject'], resources: [`${BUCKET}/runs/*`, `${BUCKET}/trainer/active-run.json`, `${BUCKET}/models/*`, ...artifacts] },
        { actions: ['s3:ListBucket'], resources: [BUCKET] },
        { actions: ['s3:PutObject'], resources: [`${BUCKET}/runs/*/replicas/replica-${n}.json`, `${BUCKET}/runs/*/replica-reports/*/replica-${n}.json`, `${BUCKET}/boxes/replica-${n}/boot.json`] },
        { actions: ['ssm:GetParameter'], resources: ['${aws.ssm.Parameter.TrainerTokenParameter.arn}'] },
        SESSION_MANAGER,
      ]);
    }
    expect(all.Episode).toContainEqual({ actions: ['s3:GetObject'], resources: [`${BUCKET}/runs/*/replicas/replica-1.json`, `${BUCKET}/runs/*/replicas/replica-2.json`] });
    // What the Episode function pins is writable by that box's role (and the trainer's) alone.
    const writers = (key: string) => Object.keys(all).filter((role) => allows(all[role], 's3:PutObject', `${BUCKET}/${key}`));
    expect(writers(keys.replica('r1', 'replica-1'))).toEqual(['TrainerRole', 'ReplicaRole1']);
    expect(writers(keys.replica('r1', 'replica-2'))).toEqual(['TrainerRole', 'ReplicaRole2']);
    expect(writers(keys.replicaReport('r1', 4, 'replica-2'))).toEqual(['TrainerRole', 'ReplicaRole2']);
    expect(writers(keys.trainerCertificate())).toEqual(['TrainerRole']);
    // Each box's boot state: its own role's write alone.
    expect(writers(keys.boxBoot('trainer'))).toEqual(['TrainerRole']);
    expect(writers(keys.boxBoot('replica-2'))).toEqual(['ReplicaRole2']);
    expect(writers(keys.activeRun())).toEqual(['TrainerRole']);
    expect(writers(keys.coordinatorLease('r1', 0))).toEqual(['TrainerRole']);
    // The model store: pushed from outside the stack; none of its roles may write it.
    for (const key of [keys.modelName('m'), keys.modelManifest('a'.repeat(64)), keys.modelBlob('b'.repeat(64))]) expect(writers(key), key).toEqual([]);
    for (const key of [keys.manifest('r1', 0), keys.update('r1', 0), keys.checkpointWeights('r1', 0), keys.log('r1'), keys.runStatus('r1'), keys.reward('r1', 0, 0, 't')]) {
      expect(writers(key).filter((r) => r.startsWith('Replica')), key).toEqual([]);
    }
    // Without replica boxes the Episode function reads no announcement.
    expect((await roles()).Episode.flatMap((s) => s.resources).filter((r) => r.includes('/replicas/'))).toEqual([]);
  });

  it('a replica box follows the active run of a pushed model within its role: pull the model, restore, announce with its certificate, report; nothing denied', async () => {
    const statements = (await roles({ ESOPT_REPLICAS: '2' })).ReplicaRole1;
    const inner = new FsObjectStore(mkdtempSync(join(tmpdir(), 'esopt-iam-replica-')));
    const { manifestSha256 } = await pushModel(inner, DEMO, { name: 'demo' });
    const config = RunConfig.parse(tinyRunConfig({ name: 'iam-replica', model: { name: 'demo', manifest: manifestSha256 } }));
    const cache = mkdtempSync(join(tmpdir(), 'esopt-iam-cache-'));
    const savedCache = process.env.ESOPT_MODEL_CACHE;
    process.env.ESOPT_MODEL_CACHE = cache;
    onTestFinished(() => {
      if (savedCache === undefined) delete process.env.ESOPT_MODEL_CACHE;
      else process.env.ESOPT_MODEL_CACHE = savedCache;
    });
    // What the coordinator box and the Api wrote: the run, its status, and which run the box trains.
    const now = new Date().toISOString();
    await inner.put(keys.config('r1'), JSON.stringify(config));
    await inner.put(keys.runStatus('r1'), JSON.stringify({ run: 'r1', state: 'running', requestedAt: now, startedAt: now, finishedAt: null, error: null, updatedAt: now }));
    await inner.put(keys.activeRun(), JSON.stringify({ run: 'r1', startedAt: now }));
    const store = new EnforcingStore(inner, statements);
    const tls = await createTlsIdentity(['127.0.0.1']);
    const box = new ReplicaBox({ store, id: 'replica-1', publicUrl: 'https://127.0.0.1:1/v1', host: '127.0.0.1', port: 0, token: 't', tls, pollMs: 20, followPollMs: 20, log: { info() {}, error() {} } });
    const following = box.pollOnce();
    while (!(await inner.get(keys.replicaReport('r1', 0, 'replica-1')))) await new Promise((r) => setTimeout(r, 20));
    await inner.put(keys.runStatus('r1'), JSON.stringify({ run: 'r1', state: 'stopped', requestedAt: now, startedAt: now, finishedAt: now, error: null, updatedAt: now }));
    expect(await following).toBe('r1');
    await box.close();
    const announced = JSON.parse(new TextDecoder().decode((await inner.get(keys.replica('r1', 'replica-1')))!)) as { tls: { sha256: string; certificate: string } };
    expect(announced.tls.sha256).toBe(tls.sha256);
    expect(JSON.stringify(announced)).not.toContain('PRIVATE KEY');
    expect(store.denied).toEqual([]);
    expect(readdirSync(join(cache, 'store'))).toEqual([manifestSha256]);
    // Another box's announcement, the run's records and the certificate are out of its reach.
    for (const key of [keys.replica('r1', 'replica-2'), keys.replicaReport('r1', 0, 'coordinator'), keys.manifest('r1', 0), keys.trainerCertificate(), keys.activeRun()]) {
      await expect(store.put(key, '{}'), key).rejects.toThrow(/AccessDenied: s3:PutObject/);
    }
  });
});
