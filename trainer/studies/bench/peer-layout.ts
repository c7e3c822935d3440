/**
 * An export directory in the layout transformers.js loads from the local disk: `<root>/<name>/` with the
 * config and tokenizer files, and the graph (with its external data) under `onnx/`. Links, not copies, so
 * both engines read the very same bytes.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

export interface PeerLayout {
  root: string;
  name: string;
  /** Whether the graph keeps its weights in `model.onnx_data` (transformers.js must be told). */
  externalData: boolean;
  remove(): void;
}

export function peerLayout(dir: string): PeerLayout {
  const from = resolve(dir);
  if (!existsSync(join(from, 'model.onnx'))) throw new Error(`${dir}: no model.onnx — the peer benchmark takes a preset or an fp32 export directory with model.onnx at its top`);
  const root = mkdtempSync(join(tmpdir(), 'esopt-peer-'));
  const name = 'model';
  mkdirSync(join(root, name, 'onnx'), { recursive: true });
  for (const f of readdirSync(from)) {
    if (!statSync(join(from, f)).isFile()) continue;
    symlinkSync(join(from, f), join(root, name, f));
    symlinkSync(join(from, f), join(root, name, 'onnx', f));
  }
  return { root, name, externalData: existsSync(join(from, 'model.onnx_data')), remove: () => rmSync(root, { recursive: true, force: true }) };
}
