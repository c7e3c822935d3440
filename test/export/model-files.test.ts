/**
 * What an export carries beside θ_K: only the files a model is loaded with and its licence — not whatever
 * else its directory holds (a note, a key file), and not a link that leads out of the directory.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { copyModelFiles } from '../../trainer/training/export/model-files.ts';

const root = mkdtempSync(join(tmpdir(), 'esopt-model-files-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

it('copies the config, tokenizer, chat template and licence; leaves out other files, folders, weights and links out of the directory', () => {
  const src = join(root, 'model');
  const out = join(root, 'out');
  mkdirSync(join(src, 'onnx'), { recursive: true });
  mkdirSync(out);
  for (const f of ['config.json', 'tokenizer.json', 'tokenizer_config.json', 'chat_template.jinja', 'LICENSE', 'notes.txt', 'credentials.json', 'model.onnx']) writeFileSync(join(src, f), `${f}\n`);
  writeFileSync(join(root, 'secret.txt'), 'not the model\n');
  // A link named like a tokenizer file that leads out of the directory is not carried.
  symlinkSync(join(root, 'secret.txt'), join(src, 'special_tokens_map.json'));
  const copied = copyModelFiles(src, out, new Set(['model.onnx']));
  expect(copied.copied).toEqual(['LICENSE', 'chat_template.jinja', 'config.json', 'tokenizer.json', 'tokenizer_config.json']);
  expect(readdirSync(out).sort()).toEqual(copied.copied);
  expect(copied.skipped.map((s) => s.file)).toEqual(['credentials.json', 'notes.txt', 'onnx', 'special_tokens_map.json']);
  expect(copied.skipped.find((s) => s.file === 'special_tokens_map.json')?.why).toContain('link out');
  expect(readFileSync(join(out, 'config.json'), 'utf8')).toBe('config.json\n');
});
