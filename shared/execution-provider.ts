/**
 * Where onnxruntime runs a model: `cpu`, `cuda` (onnxruntime-node's CUDA provider, whose binaries are
 * installed apart) or `webgpu` (bundled with onnxruntime-node on Linux x64, over Vulkan there). The one
 * list every option, flag and record that names a provider is parsed with.
 */
import { z } from 'zod';

export const ExecutionProvider = z.enum(['cpu', 'cuda', 'webgpu']);
export type ExecutionProvider = z.infer<typeof ExecutionProvider>;
