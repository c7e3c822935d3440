import { flag, parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { storeFlags, storeFromFlags } from '../argv/store-flags.ts';
import { formatBytes, transferProgressLines } from '../../training/model-store/transfer-progress.ts';
import { UsageError } from '../argv/usage-error.ts';
import { defaultModelName, pushModel } from '../../training/model-store/push-model.ts';
import { ModelName } from '../../../shared/schemas/index.ts';

export const command: Command = {
  name: 'models push',
  usage:
    'esopt models push DIR [--name NAME] [--store DIR | --cloud] [--json]\n' +
    '  DIR: a model export directory (model.onnx + data, config.json, tokenizer.json, tokenizer_config.json); NAME defaults to its directory name\n' +
    '  --cloud: the deployed stack\'s bucket (ESOPT_BUCKET, AWS_REGION; AWS_ENDPOINT_URL_S3 to override)',
  async run(argv, io) {
    const p = parseFlags(argv, { ...storeFlags, name: { type: 'string' } }, true);
    if (p.positionals.length !== 1) throw new UsageError('give exactly one model directory');
    const dir = p.positionals[0];
    let name: string;
    try {
      name = p.values.name === undefined ? defaultModelName(dir) : flag(p.values, 'name', ModelName);
    } catch (err) {
      if (err instanceof UsageError) throw err;
      throw new UsageError((err as Error).message);
    }
    const chosen = storeFromFlags(p);
    try {
      const result = await pushModel(chosen.store, dir, { name, onProgress: transferProgressLines(io.stderr) });
      if (p.json) io.stdout(JSON.stringify({ ...result, store: chosen.where }));
      else {
        io.stdout(
          [
            `pushed ${result.name} to ${chosen.where}: ${result.files} files, ${formatBytes(result.bytes)}; ${result.uploaded.length} uploaded, ${result.alreadyStored.length} already stored`,
            `manifest ${result.manifestSha256}`,
            `use it as { "model": { "name": "${result.name}" } }`,
          ].join('\n'),
        );
      }
      return 0;
    } finally {
      chosen.close();
    }
  },
};
