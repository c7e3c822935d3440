/**
 * The ModelServer of the local API and the trainer box: an Engine for the weights asked for (θ_0 of a
 * model spec, or a run's verified checkpoint) behind an inference server; a named model is read from the
 * same store and cached on this machine first. By default on a free loopback
 * port with its own token; the trainer box serves on its public port with the stack's token instead
 * (`PublicAddress`), where the Episode function can reach it.
 */
import { randomBytes } from 'node:crypto';
import type { ModelToServe, ModelServer, ServedModel } from '../../shared/ports/model-server.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { loadLatestCheckpoint } from '../training/loop/index.ts';
import { readRunConfig } from '../training/loop/index.ts';
import { serveSpec } from '../assembly/run.ts';
import type { TlsIdentity } from '../serving/tls-identity.ts';
import type { ExecutionProvider } from '../../shared/execution-provider.ts';
import type { EngineOptions } from '../engine/engine.ts';

/** Serve where remote workers reach the server: they hold `token` in their variable `tokenEnv`. */
export interface PublicAddress {
  host: string;
  port: number;
  /** The server's address as the workers reach it, with or without /v1. */
  publicUrl: string;
  token: string;
  tokenEnv: string;
  /** Serve over HTTPS with this identity (the trainer box's, whose certificate the workers pin). */
  tls?: TlsIdentity;
}

export interface EngineModelServerOptions {
  serving?: PublicAddress;
  executionProvider?: ExecutionProvider;
}

export class EngineModelServer implements ModelServer {
  constructor(
    private readonly store: ObjectStore,
    private readonly options: EngineModelServerOptions = {},
  ) {}

  async serve(model: ModelToServe): Promise<ServedModel> {
    let spec;
    let mode: EngineOptions['mode'] = 'full';
    let lora: EngineOptions['lora'];
    if (model.kind === 'base') spec = model.model;
    else {
      const config = await readRunConfig(this.store, model.run);
      if (!config) throw new Error(`no run ${model.run}`);
      spec = config.model;
      mode = config.mode;
      lora = config.lora && { ...config.lora, seed: config.seed };
    }
    const pub = this.options.serving;
    const token = pub?.token ?? randomBytes(24).toString('hex');
    let iteration = 0;
    // Only θ itself is served here, never a member, so full mode's weights are a prepacked session
    // (rebuild-session, which never rebuilds without members): decoding at initializer speed, and on CUDA
    // θ stays on the device instead of being copied there on every run, for a prepacked copy of θ.
    const served = await serveSpec(spec, {
      models: this.store,
      engine: { mode, lora, fullModeWeights: 'rebuild-session', executionProvider: this.options.executionProvider },
      server: { token, ...(pub ? { host: pub.host, port: pub.port, tls: pub.tls } : {}) },
      prepare: async (engine) => {
        if (model.kind !== 'checkpoint') return;
        const loaded = await loadLatestCheckpoint(this.store, model.run, engine.segments(), model.iteration ?? Infinity);
        if (!loaded) throw new Error(`run ${model.run} has no verified checkpoint${model.iteration === undefined ? '' : ` at or before iteration ${model.iteration}`}`);
        if (model.iteration !== undefined && loaded.meta.iteration !== model.iteration) throw new Error(`the checkpoint of iteration ${model.iteration} did not verify (newest good one: ${loaded.meta.iteration})`);
        await engine.commitUpdate();
        iteration = loaded.meta.iteration;
      },
    });
    return {
      baseUrl: pub ? `${pub.publicUrl.replace(/\/+$/, '').replace(/\/v1$/, '')}/v1` : `${served.server.url}/v1`,
      model: 'base',
      token,
      ...(pub ? { tokenEnv: pub.tokenEnv } : {}),
      iteration,
      close: () => served.close(),
    };
  }
}
