/** Flag sets several commands share: which model to load (a preset's name or an export directory, engine/model/presets.ts `modelSpecFlag`), and where onnxruntime runs it. */
import { stringFlags } from './args.ts';

/** `--model NAME|DIR` and `--provider cpu|cuda|webgpu`, as strings for the options schema they feed. */
export const modelFlags = stringFlags('model', 'provider');
