/**
 * The store's key layout, built and parsed in one place. Every id is validated against `Id`, so a
 * key can never climb out of its run's prefix (no `..`, `/` or absolute paths can get in).
 *
 *   runs/{run}/config.json
 *   runs/{run}/iterations/{k}/manifest.json
 *   runs/{run}/iterations/{k}/rewards/{member}/{task}.json   ← one per (member, task): duplicates collide
 *   runs/{run}/iterations/{k}/transcripts/{member}/{task}.json   ← an evaluation episode's transcript (base weights only)
 *   runs/{run}/iterations/{k}/frames/{member}/{task}/{attempt}/{step}.png ← its screenshots, one per step (the transcript names each)
 *   runs/{run}/iterations/{k}/update.json
 *   runs/{run}/checkpoints/{k}/meta.json | weights.bin
 *   runs/{run}/log.jsonl
 *   runs/{run}/metrics/{k}.json | evaluations/{k}.json | report.json | curve.svg
 *   runs/{run}/tensorboard/events.out.tfevents.{unix seconds}.{host} ← the metrics as TensorBoard reads them
 *   runs/{run}/replicas/{replica}.json                     ← a trainer replica's address (announced when caught up)
 *   runs/{run}/replica-reports/{k}/{replica}.json          ← its θ hash before iteration k (create-only)
 *   runs/{run}/coordinator/{epoch}.json                    ← the coordinator's lease (create-only per epoch)
 *   runs/{run}/exports/{k}/{format}/status.json | model.tar ← θ_k exported (GET /runs/{id}/model)
 *   runs/{run}/status.json | stop.json                     ← the API's view of a run, and a stop request
 *   evaluations/{id}/request.json | status.json | plan.json ← a pay-per-episode evaluation (records: runs/{id}/…)
 *   idempotency/{sha256}.json                               ← a POST's stored response, by Idempotency-Key
 *   queue/{run|evaluation}/{id}.json                        ← work the API leaves for the trainer box
 *   claims/{run|evaluation}/{id}.json                       ← the box that took it (create-only: one per work item)
 *   trainer/certificate.json                                ← the box's TLS certificate, which the Episode function pins
 *   trainer/active-run.json                                 ← the run the coordinator box trains now (replica boxes follow it)
 *   boxes/{box}/boot.json                                   ← a box's boot state (trainer/cloud/box/box-boot.sh writes it)
 *   models/blobs/sha256/{hex}                               ← a pushed model's file, by its content's sha256 (create-only)
 *   models/manifests/sha256/{hex}.json                      ← a model's manifest, by its own sha256 (create-only): what runs pin
 *   models/names/{name}.json                                ← the manifest a name points at now (written last by a push)
 *   models/pushes/{push}.json                               ← a push under way: the blobs it will name (prune keeps them)
 *   suites/manifests/sha256/{hex}.json                      ← a task suite (TaskSuite JSON), by its own sha256 (create-only): what runs pin
 *   suites/names/{name}.json                                ← the suite a name points at now (written last by a push)
 *   instructions/manifests/sha256/{hex}.json                ← instructions (Instructions JSON: system text, skills), by their own sha256 (create-only)
 *   instructions/names/{name}.json                          ← the instructions a name points at now (written last by a push)
 *   task-folders/blobs/sha256/{hex}                         ← a pushed task folder's file, by its content's sha256 (create-only)
 *   task-folders/manifests/sha256/{hex}.json                ← a task folder's manifest (TaskFolderManifest), by its own sha256 (create-only)
 *   task-folders/names/{name}.json                          ← the folder a name points at now (written last by a push)
 */
import { ExportFormat, Id, InstructionsName, Iteration, MemberRef, ModelName, Sha256, TaskSuiteName, WorkKind } from './schemas/index.ts';

const ITER_WIDTH = 8; // zero-padded so lexical list order is iteration order

function id(value: string, what: string): string {
  const r = Id.safeParse(value);
  if (!r.success) throw new Error(`invalid ${what} ${JSON.stringify(value)}: ${r.error.issues[0]?.message}`);
  return value;
}
function iter(k: number): string {
  const r = Iteration.safeParse(k);
  if (!r.success) throw new Error(`invalid iteration ${k}: ${r.error.issues[0]?.message}`);
  return String(k).padStart(ITER_WIDTH, '0');
}
function member(m: number | 'base'): string {
  const r = MemberRef.safeParse(m);
  if (!r.success) throw new Error(`invalid member ${JSON.stringify(m)}`);
  return m === 'base' ? 'base' : String(m);
}

/** Steps are zero-padded too, so a listing of an episode's frames is in step order. */
function frameStep(step: number): string {
  if (!Number.isInteger(step) || step < 0 || step > 99_999) throw new Error(`invalid frame step ${step}`);
  return String(step).padStart(5, '0');
}

function sha256(hex: string, what: string): string {
  if (!Sha256.safeParse(hex).success) throw new Error(`invalid ${what} ${JSON.stringify(hex)}: must be 64 lowercase hex digits`);
  return hex;
}

export const keys = {
  run: (run: string) => `runs/${id(run, 'run id')}/`,
  config: (run: string) => `${keys.run(run)}config.json`,
  iteration: (run: string, k: number) => `${keys.run(run)}iterations/${iter(k)}/`,
  manifest: (run: string, k: number) => `${keys.iteration(run, k)}manifest.json`,
  rewards: (run: string, k: number) => `${keys.iteration(run, k)}rewards/`,
  reward: (run: string, k: number, m: number | 'base', task: string) =>
    `${keys.rewards(run, k)}${member(m)}/${id(task, 'task id')}.json`,
  transcript: (run: string, k: number, m: number | 'base', task: string) =>
    `${keys.iteration(run, k)}transcripts/${member(m)}/${id(task, 'task id')}.json`,
  /**
   * One step's screenshot of an episode (step 0: after reset). `attempt` is the delivery that played it: a
   * re-delivered episode never writes over, nor names, the frames of an attempt that died half-way.
   */
  frame: (run: string, k: number, m: number | 'base', task: string, attempt: string, step: number) =>
    `${keys.iteration(run, k)}frames/${member(m)}/${id(task, 'task id')}/${id(attempt, 'attempt id')}/${frameStep(step)}.png`,
  update: (run: string, k: number) => `${keys.iteration(run, k)}update.json`,
  checkpoints: (run: string) => `${keys.run(run)}checkpoints/`,
  checkpointMeta: (run: string, k: number) => `${keys.checkpoints(run)}${iter(k)}/meta.json`,
  checkpointWeights: (run: string, k: number) => `${keys.checkpoints(run)}${iter(k)}/weights.bin`,
  log: (run: string) => `${keys.run(run)}log.jsonl`,
  metricsRow: (run: string, k: number) => `${keys.run(run)}metrics/${iter(k)}.json`,
  /** The evaluation of θ_k (k updates applied). */
  evaluationOf: (run: string, k: number) => `${keys.run(run)}evaluations/${iter(k)}.json`,
  replicas: (run: string) => `${keys.run(run)}replicas/`,
  replica: (run: string, replica: string) => `${keys.replicas(run)}${id(replica, 'replica id')}.json`,
  replicaReports: (run: string, k: number) => `${keys.run(run)}replica-reports/${iter(k)}/`,
  replicaReport: (run: string, k: number, replica: string) => `${keys.replicaReports(run, k)}${id(replica, 'replica id')}.json`,
  coordinatorLeases: (run: string) => `${keys.run(run)}coordinator/`,
  coordinatorLease: (run: string, epoch: number) => `${keys.coordinatorLeases(run)}${iter(epoch)}.json`,
  /** θ_k exported as a model archive (GET /runs/{id}/model): its status, and the tarball once ready. */
  modelExport: (run: string, k: number, format: ExportFormat) => `${keys.run(run)}exports/${iter(k)}/${ExportFormat.parse(format)}/`,
  modelExportStatus: (run: string, k: number, format: ExportFormat) => `${keys.modelExport(run, k, format)}status.json`,
  modelExportArchive: (run: string, k: number, format: ExportFormat) => `${keys.modelExport(run, k, format)}model.tar`,
  report: (run: string) => `${keys.run(run)}report.json`,
  curve: (run: string) => `${keys.run(run)}curve.svg`,
  /** The run's TensorBoard directory (`tensorboard --logdir` it); its event files are named as TensorBoard's own. */
  tensorboard: (run: string) => `${keys.run(run)}tensorboard/`,
  evaluation: (evaluation: string) => `evaluations/${id(evaluation, 'evaluation id')}/`,
  runStatus: (run: string) => `${keys.run(run)}status.json`,
  stopRequest: (run: string) => `${keys.run(run)}stop.json`,
  evaluationRequest: (evaluation: string) => `${keys.evaluation(evaluation)}request.json`,
  evaluationStatus: (evaluation: string) => `${keys.evaluation(evaluation)}status.json`,
  /** The resolved task ids in order: episode i plays task i mod n. */
  evaluationPlan: (evaluation: string) => `${keys.evaluation(evaluation)}plan.json`,
  workQueue: () => 'queue/',
  queuedWork: (kind: WorkKind, work: string) => `${keys.workQueue()}${WorkKind.parse(kind)}/${id(work, `${kind} id`)}.json`,
  workClaim: (kind: WorkKind, work: string) => `claims/${WorkKind.parse(kind)}/${id(work, `${kind} id`)}.json`,
  /** The prices the stack charges with (CostPrices JSON), written by the deploy; the box reads it at start. */
  stackPrices: () => 'stack/prices.json',
  /** Which artifact the boxes run (ArtifactPointer), written by the deploy; the boxes install what it names. */
  artifactPointer: () => 'stack/artifact.json',
  trainerCertificate: () => 'trainer/certificate.json',
  activeRun: () => 'trainer/active-run.json',
  boxes: () => 'boxes/',
  boxBoot: (box: string) => `boxes/${id(box, 'box id')}/boot.json`,
  modelBlobs: () => 'models/blobs/sha256/',
  modelBlob: (hex: string) => `${keys.modelBlobs()}${sha256(hex, 'blob sha256')}`,
  modelManifests: () => 'models/manifests/sha256/',
  modelManifest: (hex: string) => `${keys.modelManifests()}${sha256(hex, 'manifest sha256')}.json`,
  modelNames: () => 'models/names/',
  modelPushes: () => 'models/pushes/',
  modelPush: (push: string) => `${keys.modelPushes()}${id(push, 'push id')}.json`,
  modelName: (name: string) => {
    const r = ModelName.safeParse(name);
    if (!r.success) throw new Error(`invalid model name ${JSON.stringify(name)}: ${r.error.issues[0]?.message}`);
    return `${keys.modelNames()}${name}.json`;
  },
  suiteManifests: () => 'suites/manifests/sha256/',
  suiteManifest: (hex: string) => `${keys.suiteManifests()}${sha256(hex, 'suite manifest sha256')}.json`,
  instructionsManifest: (hex: string) => `instructions/manifests/sha256/${sha256(hex, 'instructions manifest sha256')}.json`,
  instructionsNames: () => 'instructions/names/',
  instructionsName: (name: string) => {
    const r = InstructionsName.safeParse(name);
    if (!r.success) throw new Error(`invalid instructions name ${JSON.stringify(name)}: ${r.error.issues[0]?.message}`);
    return `${keys.instructionsNames()}${name}.json`;
  },
  taskFolderBlob: (hex: string) => `task-folders/blobs/sha256/${sha256(hex, 'task folder file sha256')}`,
  taskFolderManifest: (hex: string) => `task-folders/manifests/sha256/${sha256(hex, 'task folder manifest sha256')}.json`,
  taskFolderNames: () => 'task-folders/names/',
  taskFolderName: (name: string) => {
    const r = TaskSuiteName.safeParse(name);
    if (!r.success) throw new Error(`invalid task folder name ${JSON.stringify(name)}: ${r.error.issues[0]?.message}`);
    return `task-folders/names/${name}.json`;
  },
  suiteNames: () => 'suites/names/',
  suiteName: (name: string) => {
    const r = TaskSuiteName.safeParse(name);
    if (!r.success) throw new Error(`invalid task suite name ${JSON.stringify(name)}: ${r.error.issues[0]?.message}`);
    return `${keys.suiteNames()}${name}.json`;
  },
  idempotency: (hash: string) => {
    if (!/^[0-9a-f]{64}$/.test(hash)) throw new Error(`invalid idempotency hash ${JSON.stringify(hash)}`);
    return `idempotency/${hash}.json`;
  },
};

export interface RewardKey {
  run: string;
  iteration: number;
  member: number | 'base';
  task: string;
}

const REWARD_RE = /^runs\/([A-Za-z0-9][A-Za-z0-9_-]{0,63})\/iterations\/(\d{8,})\/rewards\/(base|\d+)\/([A-Za-z0-9][A-Za-z0-9_-]{0,63})\.json$/;

/** Parse a reward key back into its parts; null for anything that is not exactly a reward key. */
export function parseRewardKey(key: string): RewardKey | null {
  const m = REWARD_RE.exec(key);
  if (!m) return null;
  return { run: m[1], iteration: Number(m[2]), member: m[3] === 'base' ? 'base' : Number(m[3]), task: m[4] };
}

export function parseCheckpointIteration(key: string): number | null {
  const m = /\/checkpoints\/(\d{8,})\/meta\.json$/.exec(key);
  return m ? Number(m[1]) : null;
}

/** The run id of a `runs/{run}/config.json` key (every run has one); null for any other key. */
export function parseRunConfigKey(key: string): string | null {
  const m = /^runs\/([A-Za-z0-9][A-Za-z0-9_-]{0,63})\/config\.json$/.exec(key);
  return m ? m[1] : null;
}

/** The kind and id of a `queue/{kind}/{id}.json` key; null for any other key. */
export function parseQueuedWorkKey(key: string): { kind: WorkKind; id: string } | null {
  const m = /^queue\/(run|evaluation|export)\/([A-Za-z0-9][A-Za-z0-9_-]{0,63})\.json$/.exec(key);
  return m ? { kind: m[1] as WorkKind, id: m[2] } : null;
}

/** The name of a `models/names/{name}.json` key; null for any other key. */
export function parseModelNameKey(key: string): string | null {
  const m = /^models\/names\/([A-Za-z0-9][A-Za-z0-9_-]{0,63})\.json$/.exec(key);
  return m ? m[1] : null;
}

/** The sha256 of a `models/blobs/sha256/{hex}` or `models/manifests/sha256/{hex}.json` key; null for any other key. */
export function parseModelContentKey(key: string): { kind: 'blob' | 'manifest'; sha256: string } | null {
  const m = /^models\/(?:blobs\/sha256\/([0-9a-f]{64})|manifests\/sha256\/([0-9a-f]{64})\.json)$/.exec(key);
  if (!m) return null;
  return m[1] ? { kind: 'blob', sha256: m[1] } : { kind: 'manifest', sha256: m[2] };
}

/**
 * What a bucket's lifecycle can expire but no key prefix can name (the transcripts under every run and iteration): objects
 * carry the tag, sst.config.ts's lifecycle selects by it.
 */
export const retentionTags = {
  transcript: { 'esopt-retention': 'transcript' },
} as const;

/** The name of a `suites/names/{name}.json` key; null for any other key. */
export function parseSuiteNameKey(key: string): string | null {
  const m = /^suites\/names\/([A-Za-z0-9][A-Za-z0-9_-]{0,46})\.json$/.exec(key);
  return m ? m[1] : null;
}

/** The name of an `instructions/names/{name}.json` key; null for any other key. */
export function parseInstructionsNameKey(key: string): string | null {
  const m = /^instructions\/names\/([A-Za-z0-9][A-Za-z0-9_-]{0,63})\.json$/.exec(key);
  return m ? m[1] : null;
}
