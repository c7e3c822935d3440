/**
 * Where a run happens: the object store its records go to and the fan-out that plays its episodes, as
 * one pair the run wiring (trainer/assembly/run.ts) takes. The embedded default is a directory +
 * the local worker pool; the cloud site (cloud-stack.ts) is an S3 bucket + the Lambda function.
 */
import type { Fanout } from '../../shared/ports/fanout.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import type { Engine } from '../engine/engine.ts';

/** How the workers reach the trainer's inference server, as the episode requests carry it. */
export interface InferenceEndpoint {
  /** The OpenAI-compatible base URL, ending in /v1. */
  baseUrl: string;
  /** The variable in the workers' environment that holds the bearer token (the token never travels in a request). */
  tokenEnv?: string;
}

export interface Site {
  store: ObjectStore;
  fanout: Fanout;
  /** Where a key of the store is, for people to open: a path, or an s3:// URL. */
  locate(key: string): string;
  /**
   * How the workers reach the inference server. Absent: the server's own (loopback) URL, which is all a
   * local pool needs; a remote fan-out must be given the server's public address.
   */
  policyEndpoint?: InferenceEndpoint;
  /** In-process targets play episodes on the run's engine: given it once the run has served it, before `warm`. */
  useEngine?(engine: Engine): void;
  /** Get the workers ready before the first iteration's clock runs. */
  warm?(): Promise<void>;
  /** Release the fan-out and the store's connections. */
  close(): Promise<void>;
}
