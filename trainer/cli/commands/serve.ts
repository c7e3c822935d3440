import { z } from 'zod';
import { FullModeWeights } from '../../../shared/schemas/index.ts';
import { openEngine, serveEngine } from '../../assembly/engine.ts';
import { flag, parseFlags } from '../argv/args.ts';
import { modelSpecFlag } from '../../engine/model/presets.ts';
import type { Command } from '../argv/command.ts';
import { checkOpenBind } from '../argv/open-bind.ts';

export const command: Command = {
  name: 'serve',
  usage: 'esopt serve [--model tiny|small|DIR] [--seed S] [--host 127.0.0.1] [--port P] [--mode full|lowrank] [--full-weights inputs|rebuild-session] [--json]   (token: ESOPT_TOKEN; required, 32+ characters, off loopback)',
  async run(argv, io) {
    const p = parseFlags(argv, {
      model: { type: 'string', default: 'tiny' },
      seed: { type: 'string', default: '0' },
      // 0.0.0.0 on the cloud trainer box (sst.config.ts), so Lambda can reach it; loopback otherwise.
      host: { type: 'string', default: '127.0.0.1' },
      port: { type: 'string', default: '8080' },
      mode: { type: 'string', default: 'full' },
      // full mode's weights: rebuild-session serves from a prepacked session (faster decoding, θ held twice)
      'full-weights': { type: 'string', default: 'inputs' },
    });
    const seed = flag(p.values, 'seed', z.coerce.number().int().min(0).max(0xffffffff));
    const model = modelSpecFlag(flag(p.values, 'model', z.string().min(1)), seed);
    const port = flag(p.values, 'port', z.coerce.number().int().min(0).max(65535));
    const host = flag(p.values, 'host', z.union([z.ipv4(), z.ipv6(), z.literal('localhost')]));
    const mode = flag(p.values, 'mode', z.enum(['full', 'lowrank']));
    const fullModeWeights = flag(p.values, 'full-weights', FullModeWeights);
    const token = process.env.ESOPT_TOKEN || undefined;
    checkOpenBind(host, token);
    const engine = await openEngine({ model, mode, fullModeWeights });
    const server = await serveEngine(engine, { host, port, token });
    const info = { url: server.url, openaiBaseUrl: `${server.url}/v1`, mode, model, auth: token ? 'bearer (ESOPT_TOKEN)' : 'none' };
    io.stdout(p.json ? JSON.stringify(info) : `serving ${JSON.stringify(model)} (${mode}) at ${info.openaiBaseUrl} — auth: ${info.auth}; Ctrl-C stops`);
    await new Promise<void>((resolve) => {
      process.once('SIGINT', resolve);
      process.once('SIGTERM', resolve);
    });
    await server.close();
    await engine.close();
    return 0;
  },
};
