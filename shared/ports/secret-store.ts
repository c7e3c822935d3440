/**
 * The secret store port: short-lived secrets (an evaluation's endpoint key) that must never be written to
 * the object store. SSM Parameter Store SecureStrings on AWS (shared/secrets/ssm.ts); on one machine the
 * same adapter talks to the dev SSM endpoint (trainer/dev/local-cloud/ssm-endpoint.ts).
 */
export interface SecretStore {
  /**
   * Create-only: resolves false when `name` exists already (nothing is written). The store deletes the
   * secret by itself at `expiresAt`, so one whose owner crashed does not outlive it.
   */
  create(name: string, value: string, expiresAt: Date): Promise<boolean>;
  /** The plain value; null when there is none: never written, deleted, or expired. */
  get(name: string): Promise<string | null>;
  /** Idempotent: deleting what is gone is not an error. */
  delete(name: string): Promise<void>;
}
