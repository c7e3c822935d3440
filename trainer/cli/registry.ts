import { benchCommands } from './commands/bench/index.ts';
import type { CommandEntry } from './argv/command.ts';

/**
 * Every command, loaded lazily so `esopt --help` does not pay for onnxruntime or Chromium.
 * Add a line here for a new command; its module lives in ./commands/. The order is the order of `--help`:
 * running things first, then the API clients, the inspection tools and the benchmarks (their own list).
 */

export const registry: CommandEntry[] = [
  { name: 'start', summary: 'the demo: train configs/demo.json end to end (npm start)', load: async () => (await import('./commands/start.ts')).command },
  { name: 'train', summary: 'run ES training end to end, here or against the deployed stack with --cloud (or --resume a run)', load: async () => (await import('./commands/train.ts')).command },
  { name: 'replica', summary: 'follow a run as a trainer replica: hold θ, serve the members routed here, apply each logged update', load: async () => (await import('./commands/replica.ts')).command },
  { name: 'replica-box', summary: "follow the run the deployed coordinator box trains, as one of the stack's trainer replicas (a replica box's service)", load: async () => (await import('./commands/replica-box.ts')).command },
  { name: 'trainer-box', summary: "run the runs and evaluations queued in the deployed stack's bucket (the GPU box's service)", load: async () => (await import('./commands/trainer-box.ts')).command },
  { name: 'export', summary: "write a run's model at an iteration (θ_K) out of the system: an ONNX model directory or Hugging Face safetensors", load: async () => (await import('./commands/export.ts')).command },
  { name: 'serve', summary: 'serve the OpenAI-compatible inference API until interrupted', load: async () => (await import('./commands/serve.ts')).command },
  { name: 'episode', summary: 'play one episode of an environment with a scripted or HTTP policy', load: async () => (await import('./commands/episode.ts')).command },
  { name: 'tasks', summary: "sample an environment's tasks from its train or eval split", load: async () => (await import('./commands/tasks.ts')).command },
  { name: 'tasks push', summary: 'push a JSONL task suite (each line checked by its environment) or a MiniWoB++ folder to the store by content (--store DIR or --cloud)', load: async () => (await import('./commands/tasks-push.ts')).command },
  { name: 'tasks list', summary: 'the pushed task suites and task folders', load: async () => (await import('./commands/tasks-list.ts')).command },
  { name: 'tasks show', summary: "a pushed task suite: its environment, manifest sha256 and split sizes", load: async () => (await import('./commands/tasks-show.ts')).command },
  { name: 'instructions push', summary: "push instructions (c_t): a system text and skill documents, stored by content (--store DIR or --cloud)", load: async () => (await import('./commands/instructions-push.ts')).command },
  { name: 'instructions list', summary: 'the pushed instructions', load: async () => (await import('./commands/instructions-list.ts')).command },
  { name: 'instructions show', summary: 'pushed instructions: their manifest sha256, system text and skills', load: async () => (await import('./commands/instructions-show.ts')).command },
  { name: 'pretrain', summary: "pretrain a built model by imitating an environment's oracle (the demo's base agent)", load: async () => (await import('./commands/pretrain.ts')).command },
  { name: 'api', summary: 'serve the HTTP API and dashboard over the local store', load: async () => (await import('./commands/api.ts')).command },
  { name: 'runs start', summary: 'start a training run on the API from a run config file', load: async () => (await import('./commands/runs-start.ts')).command },
  { name: 'runs list', summary: "list the runs in the API's store", load: async () => (await import('./commands/runs-list.ts')).command },
  { name: 'runs show', summary: 'a run: state, iteration, latest metrics', load: async () => (await import('./commands/runs-show.ts')).command },
  { name: 'runs stop', summary: 'stop a run after its current iteration', load: async () => (await import('./commands/runs-stop.ts')).command },
  { name: 'runs resume', summary: 'go on with a run that ended, with more --iterations or a larger budget', load: async () => (await import('./commands/runs-resume.ts')).command },
  { name: 'runs model', summary: "download a run's model after K updates as a tarball (ONNX or safetensors)", load: async () => (await import('./commands/runs-model.ts')).command },
  { name: 'runs watch', summary: 'follow a run live until it ends', load: async () => (await import('./commands/runs-watch.ts')).command },
  { name: 'evals start', summary: 'start a pay-per-episode evaluation', load: async () => (await import('./commands/evals-start.ts')).command },
  { name: 'evals show', summary: 'an evaluation: summary, interval, cost and every episode', load: async () => (await import('./commands/evals-show.ts')).command },
  { name: 'evals compare', summary: 'agents evaluated on the same tasks: success (95% CI) against cost per episode, the Pareto frontier marked; result files in and out', load: async () => (await import('./commands/evals-compare.ts')).command },
  { name: 'models push', summary: 'push a model directory to the store by content (--store DIR or --cloud); runs then name it as { model: { name } }', load: async () => (await import('./commands/models-push.ts')).command },
  { name: 'models list', summary: 'the models pushed to the store, by name', load: async () => (await import('./commands/models-list.ts')).command },
  { name: 'models show', summary: "a pushed model: its manifest's sha256 and every file", load: async () => (await import('./commands/models-show.ts')).command },
  { name: 'models rm', summary: 'remove a model name from the store (--prune: and the files no name uses)', load: async () => (await import('./commands/models-rm.ts')).command },
  { name: 'schemas', summary: 'the contract (RunConfig, EpisodeRequest, RewardRecord, …) as JSON Schema, for clients in other languages', load: async () => (await import('./commands/schemas.ts')).command },
  { name: 'cloud doctor', summary: 'before a deploy: each AWS quota, setting and local tool the stack needs, one line each with its fix', load: async () => (await import('./commands/cloud-doctor.ts')).command },
  { name: 'cloud logs', summary: "the boxes' service logs or the Episode or Api function's, from CloudWatch Logs (--since, --follow)", load: async () => (await import('./commands/cloud-logs.ts')).command },
  { name: 'cloud status', summary: "the deployed stack: each box's boot state, and whether the Api, the trainer box and the Episode function answer", load: async () => (await import('./commands/cloud-status.ts')).command },
  { name: 'dev cloud', summary: 'one iteration through s3rver + the local Lambda endpoint (S3 and Lambda adapters)', load: async () => (await import('./commands/dev-cloud.ts')).command },
  { name: 'dev rehearse', summary: 'the deployed stack on this machine from what a deploy ships (SST bundles under aws-lambda-ric, boxes from the artifact), used end to end', load: async () => (await import('./commands/dev-rehearse.ts')).command },
  { name: 'noise', summary: 'print values of a member\'s seeded Gaussian noise', load: async () => (await import('./commands/noise.ts')).command },
  { name: 'experiment horizon', summary: 'base, ES, GRPO and random search by horizon and seed, same budget (docs/RESULTS.md)', load: async () => (await import('./commands/experiment-horizon.ts')).command },
  { name: 'experiment horizon-summary', summary: "recompute a horizon experiment's summary (table, intervals, curves) from its cell files", load: async () => (await import('./commands/experiment-horizon-summary.ts')).command },
  { name: 'es step', summary: 'one ES update from JSON on stdin, with ε shown', load: async () => (await import('./commands/es-step.ts')).command },
  { name: 'bench all', summary: 'run every benchmark (or --only some) with its defaults and gather the results, the machine and its load', load: async () => (await import('./commands/bench/all.ts')).command },
  ...benchCommands,
];
