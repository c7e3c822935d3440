/**
 * Engines and the inference server in front of one, for every entry point (commands, benchmarks, jobs, the
 * box, studies): the composition root's face of trainer/engine/model/create-engine.ts and
 * trainer/serving/server.ts. Nothing outside engine/, serving/ and assembly/ calls those builders
 * (docs/architecture.json, `builders`), so how an engine is made and served is decided here and in its room.
 */
import type { Engine, EngineOptions } from '../engine/engine.ts';
import { createEngine, createOnnxEngine } from '../engine/model/create-engine.ts';
import type { LoadedModel } from '../engine/model/model-dir.ts';
import { startInferenceServer, type RunningServer, type ServerOptions } from '../serving/server.ts';

/** The engine for `options.model`, opened from its export directory or preset. */
export function openEngine(options: EngineOptions): Promise<Engine> {
  return createEngine(options);
}

/**
 * The engine over a model already opened (a benchmark that builds two engines on one model, or reads the
 * model's layout first); the concrete type, for the measurements only the ONNX engine exposes.
 */
export function openEngineOn(model: LoadedModel, options: EngineOptions): ReturnType<typeof createOnnxEngine> {
  return createOnnxEngine(model, options);
}

/** The OpenAI-compatible inference server in front of `engine` (trainer/serving/). */
export function serveEngine(engine: Engine, options: ServerOptions = {}): Promise<RunningServer> {
  return startInferenceServer(engine, options);
}
