/**
 * Serves our own weights over the OpenAI-compatible API so episodes can play them: the base model of a
 * model spec, or a run's checkpoint. The trainer box implements it (an Engine behind an inference server).
 */
import type { ModelSpec } from '../schemas/index.ts';

export type ModelToServe = { kind: 'base'; model: ModelSpec } | { kind: 'checkpoint'; run: string; iteration?: number };

export interface ServedModel {
  /** e.g. http://127.0.0.1:PORT/v1 */
  baseUrl: string;
  /** The model name to ask the endpoint for. */
  model: string;
  /** Bearer token of the endpoint, if it has one. */
  token?: string;
  /**
   * The variable that already holds `token` in every worker's environment (remote workers, such as the
   * Episode function's ESOPT_TRAINER_TOKEN); absent: the token is handed to the workers as it is.
   */
  tokenEnv?: string;
  /** Which weights: the checkpoint's iteration, or 0 for a base model. */
  iteration: number;
  close(): Promise<void>;
}

export interface ModelServer {
  serve(model: ModelToServe): Promise<ServedModel>;
}
