/**
 * Every file in configs/ parses through its schema (the environment's options through the environment's
 * own schema), every model directory a config names exists, loads, and is the output of a named
 * pretraining config with the same shape, and every pretraining config runs (one shrunk step).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { RunConfig } from '../../shared/schemas/index.ts';
import { ThroughputRecords } from '../../shared/decode-throughput.ts';
import { loadEnvironment } from '../../environments/index.ts';
import { GrpoOptions } from '../../trainer/studies/grpo/grpo.ts';
import { DemoConfig } from '../../trainer/studies/demo/demo-config.ts';
import { HorizonExperimentConfig } from '../../trainer/studies/experiment/horizon-config.ts';
import { loadModelDir } from '../../trainer/engine/model/model-dir.ts';
import { modelConfigFor, PretrainConfig, pretrain } from '../../trainer/studies/pretrain/pretrain.ts';

const repo = (path: string) => fileURLToPath(new URL(`../../${path}`, import.meta.url));
const read = (file: string): unknown => JSON.parse(readFileSync(repo(`configs/${file}`), 'utf8'));

/** Each config file's schema; a new file must be added here (the first test fails until it is). */
const SCHEMAS: Record<string, z.ZodType> = {
  'decode-throughput.json': ThroughputRecords,
  'demo.json': RunConfig,
  'demo-grpo.json': GrpoOptions,
  'experiment-horizon.json': HorizonExperimentConfig,
  'pretrain-sudoku-4x4-demo.json': PretrainConfig,
  'pretrain-sudoku-6x6-grid.json': PretrainConfig,
  'pretrain-sudoku-9x9.json': PretrainConfig,
};

/** The committed model directories and the pretraining config that produced each (`esopt pretrain --config`). */
const MODELS: Record<string, string> = {
  'models/sudoku-4x4-demo': 'pretrain-sudoku-4x4-demo.json',
  'models/sudoku-6x6-grid': 'pretrain-sudoku-6x6-grid.json',
};

const files = readdirSync(repo('configs')).filter((f) => f.endsWith('.json')).sort();

/** The run configs inside a parsed config file. */
function runConfigs(file: string, parsed: unknown): RunConfig[] {
  if (SCHEMAS[file] === HorizonExperimentConfig) return [(parsed as HorizonExperimentConfig).run];
  if (SCHEMAS[file] === RunConfig) return [parsed as RunConfig];
  return [];
}

describe('configs/', () => {
  it('the demo\'s two files make a valid demo config (GRPO group = ES population)', () => {
    DemoConfig.parse({ run: read('demo.json'), grpo: read('demo-grpo.json') });
  });

  it('has a schema for every file', () => {
    expect(files.filter((f) => !(f in SCHEMAS))).toEqual([]);
    expect(Object.keys(SCHEMAS).filter((f) => !files.includes(f))).toEqual([]);
  });

  it.each(files)('%s parses, with its environment options and model', async (file) => {
    const parsed = SCHEMAS[file].parse(read(file));
    for (const run of runConfigs(file, parsed)) {
      const env = await loadEnvironment(run.environment.name);
      env.optionsSchema.parse(run.environment.options);
      if ('dir' in run.model) {
        expect(MODELS[run.model.dir], `${file} names ${run.model.dir}, which no pretraining config produces`).toBeDefined();
        const pre = PretrainConfig.parse(read(MODELS[run.model.dir]));
        const model = loadModelDir(repo(run.model.dir));
        expect(model.config).toMatchObject(modelConfigFor(pre));
      }
    }
    if (SCHEMAS[file] === PretrainConfig) {
      const pre = parsed as PretrainConfig;
      (await loadEnvironment(pre.environment.name)).optionsSchema.parse(pre.environment.options);
    }
  });

  it.each(files.filter((f) => SCHEMAS[f] === PretrainConfig))('%s runs (one shrunk step)', async (file) => {
    const pre = PretrainConfig.parse(read(file));
    const r = await pretrain(PretrainConfig.parse({ ...pre, tasks: { ...pre.tasks, count: 2 }, steps: 1, batch: 1, warmupSteps: 0 }));
    expect(r.history).toHaveLength(1);
    expect(Number.isFinite(r.history[0].loss)).toBe(true);
  }, 60_000);
});
