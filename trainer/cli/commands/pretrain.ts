import cliProgress from 'cli-progress';
import { z } from 'zod';
import { PretrainConfig, pretrain, savePretrained, type PretrainStep } from '../../studies/pretrain/pretrain.ts';
import { flag, parseFlags } from '../argv/args.ts';
import type { Command } from '../argv/command.ts';
import { readJsonConfig } from '../argv/config-file.ts';

function readPretrainConfig(path: string): PretrainConfig {
  return readJsonConfig(path, PretrainConfig, 'pretraining config');
}

export const command: Command = {
  name: 'pretrain',
  usage: 'esopt pretrain --config configs/pretrain-<name>.json --out DIR [--snapshot-every N] [--json]',
  async run(argv, io) {
    const p = parseFlags(argv, { config: { type: 'string' }, out: { type: 'string' }, 'snapshot-every': { type: 'string', default: '0' } });
    const config = readPretrainConfig(flag(p.values, 'config', z.string().min(1)));
    const out = flag(p.values, 'out', z.string().min(1));
    const snapshotEvery = flag(p.values, 'snapshot-every', z.coerce.number().int().min(0));
    const started = performance.now();
    const bar = p.json
      ? null
      : new cliProgress.SingleBar(
          { stream: process.stderr, format: 'pretrain |{bar}| step {value}/{total} | loss {loss} | token acc {acc} | ETA {eta_formatted}', noTTYOutput: true, notTTYSchedule: 5000, hideCursor: true },
          cliProgress.Presets.shades_classic,
        );
    let window: PretrainStep[] = [];
    const result = await pretrain(config, (s, total, live) => {
      // Intermediate weights, for picking a base that is capable but not perfect.
      if (snapshotEvery > 0 && s.step % snapshotEvery === 0 && s.step < total) savePretrained(`${out}.step-${s.step}`, live);
      if (s.step === 1) bar?.start(total, 0, { loss: '–', acc: '–' });
      window = [...window.slice(-19), s];
      const mean = (f: (x: PretrainStep) => number) => window.reduce((a, x) => a + f(x), 0) / window.length;
      bar?.update(s.step, { loss: mean((x) => x.loss).toFixed(3), acc: mean((x) => x.accuracy).toFixed(3) });
    });
    bar?.stop();
    savePretrained(out, result);
    const last = result.history.slice(-20);
    const summary = {
      out,
      sequences: result.sequences,
      steps: result.history.length,
      finalLoss: last.reduce((a, s) => a + s.loss, 0) / last.length,
      finalTokenAccuracy: last.reduce((a, s) => a + s.accuracy, 0) / last.length,
      seconds: (performance.now() - started) / 1000,
    };
    io.stdout(p.json ? JSON.stringify(summary) : `wrote ${out} (${summary.sequences} imitation sequences, ${summary.steps} steps, loss ${summary.finalLoss.toFixed(4)}, token accuracy ${summary.finalTokenAccuracy.toFixed(3)}, ${summary.seconds.toFixed(0)} s)`);
    return 0;
  },
};
