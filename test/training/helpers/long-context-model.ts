/**
 * The `tiny` preset with an 8,192-token context, written as an export directory: room for tool lists in
 * the byte-level prompt (one token per byte) at tiny's speed.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildDecoder } from '../../../trainer/engine/model/build-decoder.ts';
import { byteTokenizerConfig, byteTokenizerJson } from '../../../trainer/engine/model/byte-tokenizer.ts';
import { saveModelDir } from '../../../trainer/engine/model/model-dir.ts';
import { PRESETS } from '../../../trainer/engine/model/presets.ts';
import { initDecoderWeights } from '../../../trainer/engine/model/weights.ts';

export function saveLongContextTiny(seed = 0): string {
  const dir = mkdtempSync(join(tmpdir(), 'esopt-tiny-4k-'));
  const config = { ...PRESETS.tiny, max_position_embeddings: 8192 };
  saveModelDir(dir, { config, graph: buildDecoder(config, initDecoderWeights(config, seed)), tokenizerJson: byteTokenizerJson(), tokenizerConfig: byteTokenizerConfig() });
  return dir;
}
