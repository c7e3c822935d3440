/**
 * Engines for every entry point (commands, benchmarks, hosts, scripts): the composition root's face of
 * trainer/engine/model/create-engine.ts, so that nothing outside model/ and compose/ chooses how an engine is built.
 */
export { createEngine, createOnnxEngine } from '../engine/model/create-engine.ts';
