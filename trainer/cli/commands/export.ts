import { z } from 'zod';
import { ExportFormat, Id, Iteration } from '../../../shared/schemas/index.ts';
import { exportModel } from '../../training/export/export-model.ts';
import { writeRunArtifact } from '../../training/export/run-artifact.ts';
import { flag, parseFlags } from '../argv/args.ts';
import { storeFlags, storeFromFlags } from '../argv/store-flags.ts';
import type { Command } from '../argv/command.ts';
import { UsageError } from '../argv/usage-error.ts';

export const command: Command = {
  name: 'export',
  usage:
    'esopt export --run RUN --out DIR [--iteration K] [--format onnx|safetensors|run] [--store DIR | --cloud] [--json]\n' +
    '  θ_K of the run (default: its latest iteration) as an ONNX model directory in the layout the model was loaded from (onnx, the default)\n' +
    "  or as model.safetensors with the Hugging Face parameter names, beside config.json and the tokenizer files; DIR must be new or empty\n" +
    '  run: the run as a portable artifact (run.json, run.txt, theta0.bin): θ_0 and every update, to replay in any framework (docs/REPLAY.md)\n' +
    '  --cloud: the run in ESOPT_BUCKET (AWS_REGION; AWS_ENDPOINT_URL_S3 overrides)',
  async run(argv, io) {
    const p = parseFlags(argv, {
      run: { type: 'string' },
      out: { type: 'string' },
      iteration: { type: 'string' },
      format: { type: 'string', default: 'onnx' },
      ...storeFlags,
    });
    const run = flag(p.values, 'run', Id);
    const out = flag(p.values, 'out', z.string().min(1));
    const iteration = p.values.iteration === undefined ? undefined : flag(p.values, 'iteration', z.coerce.number().pipe(Iteration));
    const format = flag(p.values, 'format', z.union([ExportFormat, z.literal('run')]));
    const { store } = storeFromFlags(p);
    if (format === 'run') {
      if (iteration !== undefined) throw new UsageError('--iteration is for a model export: --format run writes every update (replay as far as you need)');
      const written = await writeRunArtifact(store, run, out);
      const files = { json: written.json, text: written.text, theta0: written.theta0 };
      io.stdout(p.json ? JSON.stringify({ run, format, updates: written.artifact.updates.length, files }) : `run ${run}: ${written.artifact.updates.length} updates on θ_0 as a portable artifact: ${Object.values(files).join(', ')} (replay: docs/REPLAY.md)`);
      return 0;
    }
    const started = Date.now();
    const summary = await exportModel({ store, run, iteration, out, format, onProgress: (m) => io.stderr(`export: ${m} (${((Date.now() - started) / 1000).toFixed(1)} s)`) });
    if (p.json) io.stdout(JSON.stringify(summary));
    else {
      const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;
      io.stdout(
        [
          `run ${summary.run}: θ_${summary.iteration} (${summary.thetaHash}) as ${summary.format} in ${summary.out}`,
          ...(summary.adapter ? [`  (a LoRA run: the model is merged; its adapters, in PEFT's layout, are in ${summary.adapter}/)`] : []),
          ...summary.files.map((f) => `  ${f.path}  ${mib(f.bytes)}  sha256 ${f.sha256}`),
          ...summary.skipped.map((s) => `  (not carried over: ${s.file}: ${s.why})`),
        ].join('\n'),
      );
    }
    return 0;
  },
};
