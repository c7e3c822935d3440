/**
 * Exports a run's θ_K (`exportModel`) and writes `esopt-greedy.json` beside it: the greedy continuations
 * esopt's engine decodes on θ_K for the prompts of a fixture's greedy.json, for
 * scripts/check-safetensors-torch.py to compare with PyTorch on the exported weights.
 *
 *   npx tsx scripts/export-greedy.ts --store DIR --run RUN --out DIR [--format safetensors] [--iteration K] --prompts test/fixtures/torch-llama-tied/greedy.json
 */
import { resolveModelSpec } from '../trainer/training/model-store/resolve-model.ts';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ExportFormat } from '../shared/schemas/index.ts';
import { exportModel } from '../trainer/training/export/export-model.ts';
import { thetaAtIteration } from '../trainer/training/export/theta-at-iteration.ts';
import { openEngineOn } from '../trainer/assembly/engine.ts';
import { storeAt } from '../trainer/assembly/stores.ts';

const { values } = parseArgs({ options: { store: { type: 'string' }, run: { type: 'string' }, out: { type: 'string' }, format: { type: 'string', default: 'safetensors' }, iteration: { type: 'string' }, prompts: { type: 'string' } } });
if (!values.store || !values.run || !values.out || !values.prompts) throw new Error('usage: --store DIR --run RUN --out DIR --prompts greedy.json [--format F] [--iteration K]');
const store = storeAt(values.store);
const iteration = values.iteration === undefined ? undefined : Number(values.iteration);
const summary = await exportModel({ store, run: values.run, iteration, out: values.out, format: ExportFormat.parse(values.format), onProgress: (m) => process.stderr.write(`${m}\n`) });
const fixture = JSON.parse(readFileSync(values.prompts, 'utf8')) as { new_tokens: number; runs: Array<{ prompt: number[] }> };
const theta = await thetaAtIteration(store, values.run, summary.iteration);
const engine = await openEngineOn(theta.model, { model: await resolveModelSpec(theta.config.model, store), mode: theta.config.mode });
try {
  const out = await engine.generate(fixture.runs.map((r) => ({ promptIds: r.prompt, member: { kind: 'base' }, sampling: { temperature: 0, topP: 1, topK: 0, seed: 0 }, maxNewTokens: fixture.new_tokens, stop: [], ignoreEos: true })));
  const greedy = { run: summary.run, iteration: summary.iteration, thetaHash: summary.thetaHash, mode: summary.mode, runs: fixture.runs.map((r, i) => ({ prompt: r.prompt, greedy: out[i].tokenIds })) };
  writeFileSync(join(summary.out, 'esopt-greedy.json'), `${JSON.stringify(greedy, null, 2)}\n`);
  process.stdout.write(`${JSON.stringify({ ...summary, greedy: greedy.runs })}\n`);
} finally {
  await engine.close();
}
