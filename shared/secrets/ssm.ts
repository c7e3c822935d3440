/**
 * The SecretStore on SSM Parameter Store: each secret one SecureString parameter, encrypted with the
 * account's AWS-managed key `alias/aws/ssm` (whose key policy lets every principal allowed the SSM action
 * use it through SSM, so the roles need no kms: statement). Advanced tier, because only Advanced parameters
 * take an Expiration policy: SSM deletes the parameter at `expiresAt` by itself, the cleanup when whoever
 * should have deleted it crashed. Throttling is retried by the SDK's standard retry strategy. The SDK is
 * imported by the first request, not with this file, so a worker that never reads a secret never loads it.
 */
import type { SSMClient } from '@aws-sdk/client-ssm';
import { z } from 'zod';
import type { SecretStore } from '../ports/secret-store.ts';
import { SecretName } from '../schemas/evaluation-key.ts';
import { DEFAULT_AWS_REGION } from '../store/aws-region.ts';

export const SsmSecretStoreConfig = z
  .object({
    region: z.string().min(1).default(DEFAULT_AWS_REGION),
    /** An SSM-compatible endpoint instead of AWS (the dev endpoint on loopback). */
    endpoint: z.url().optional(),
    /** Attempts per request, first one included (ThrottlingException and 5xx are retried). */
    maxAttempts: z.number().int().min(1).max(20).default(5),
    /** Static credentials (the dev endpoint); otherwise the SDK's default provider chain (the function's or the box's role). */
    credentials: z.object({ accessKeyId: z.string().min(1), secretAccessKey: z.string().min(1) }).optional(),
  })
  .strict();
export type SsmSecretStoreConfigInput = z.input<typeof SsmSecretStoreConfig>;

const errorName = (err: unknown) => (err as { name?: string } | null)?.name;

type SsmSdk = typeof import('@aws-sdk/client-ssm');

export class SsmSecretStore implements SecretStore {
  private readonly config: z.infer<typeof SsmSecretStoreConfig>;
  /** The SDK and its one client, made by the first request; every later request shares them. */
  private connection?: Promise<{ sdk: SsmSdk; client: SSMClient }>;

  constructor(config: SsmSecretStoreConfigInput = {}) {
    this.config = SsmSecretStoreConfig.parse(config);
  }

  private connect(): Promise<{ sdk: SsmSdk; client: SSMClient }> {
    this.connection ??= import('@aws-sdk/client-ssm').then((sdk) => {
      const { region, endpoint, maxAttempts, credentials } = this.config;
      return { sdk, client: new sdk.SSMClient({ region, endpoint, maxAttempts, credentials }) };
    });
    return this.connection;
  }

  /** Closes the client's sockets; a store that never sent a request has none (and loads nothing). */
  destroy(): void {
    void this.connection?.then(({ client }) => client.destroy(), () => {});
  }

  async create(name: string, value: string, expiresAt: Date): Promise<boolean> {
    const { sdk, client } = await this.connect();
    const policies = [{ Type: 'Expiration', Version: '1.0', Attributes: { Timestamp: expiresAt.toISOString() } }];
    try {
      await client.send(
        new sdk.PutParameterCommand({
          Name: SecretName.parse(name),
          Value: value,
          Type: 'SecureString',
          Overwrite: false,
          Tier: 'Advanced',
          Policies: JSON.stringify(policies),
        }),
      );
      return true;
    } catch (err) {
      if (errorName(err) === 'ParameterAlreadyExists') return false;
      throw err;
    }
  }

  async get(name: string): Promise<string | null> {
    const { sdk, client } = await this.connect();
    try {
      const res = await client.send(new sdk.GetParameterCommand({ Name: SecretName.parse(name), WithDecryption: true }));
      return res.Parameter?.Value ?? null;
    } catch (err) {
      if (errorName(err) === 'ParameterNotFound') return null;
      throw err;
    }
  }

  async delete(name: string): Promise<void> {
    const { sdk, client } = await this.connect();
    try {
      await client.send(new sdk.DeleteParameterCommand({ Name: SecretName.parse(name) }));
    } catch (err) {
      if (errorName(err) !== 'ParameterNotFound') throw err;
    }
  }
}
