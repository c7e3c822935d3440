/** What the API app is built from: ports only, so one app runs in-process and on Lambda. */
import type { RateLimit } from './rate-limit.ts';
import type { Logger } from 'pino';
import type { CostPrices } from '../../shared/cost.ts';
import type { CostCaps } from './cost-caps.ts';
import type { EndpointKeyStore } from './environment-key.ts';
import type { EvaluationLauncher, RunLauncher } from '../../shared/ports/launchers.ts';
import type { ModelExports, SignedDownload } from '../../shared/ports/model-exports.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';

export interface ApiDeps {
  store: ObjectStore;
  /** The bearer token every non-public route needs (ESOPT_TOKEN). */
  token: string;
  runs: RunLauncher;
  evaluations: EvaluationLauncher;
  /** Makes a run's model archive (GET /runs/{id}/model). */
  exports: ModelExports;
  /** Presigned downloads of archives (S3); absent: the API sends the archive's bytes itself. */
  signedDownload?: SignedDownload;
  /** A deployed stack: no request may name a program or a path on its machines (request-choices.ts). */
  deployed: boolean;
  /** Whether POST /evaluations may ask for base or checkpoint models (a model host is configured). */
  servesOwnModels: boolean;
  prices: CostPrices;
  /**
   * A deployed stack's spending policy (cost-caps.ts): set, every run and evaluation needs `budget.maxCostUsd`,
   * or gets the cap given here; unset (the local API), budgets stay optional.
   */
  costCaps?: CostCaps;
  /** Where endpoint keys from the X-Esopt-Environment-Key header go (a deployed stack); absent, the header is refused. */
  endpointKeys?: EndpointKeyStore;
  log: Logger;
  /** Requests per token (rate-limit.ts): the deployed stack's and `esopt api` off loopback; unset, none. */
  rateLimit?: RateLimit;
  /** How often the events stream polls the store. */
  eventPollMs: number;
  /** End each events stream after this long (the client resumes with Last-Event-ID); unset: until the run ends. */
  eventWindowMs?: number;
}
