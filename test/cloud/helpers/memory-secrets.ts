/** A SecretStore in memory, for tests whose subject is not the SSM adapter (test/shared/ssm-secret-store.test.ts covers that). */
import type { SecretStore } from '../../../shared/ports/secret-store.ts';

export class MemorySecretStore implements SecretStore {
  readonly secrets = new Map<string, { value: string; expiresAt: Date }>();

  async create(name: string, value: string, expiresAt: Date): Promise<boolean> {
    if (this.secrets.has(name)) return false;
    this.secrets.set(name, { value, expiresAt });
    return true;
  }

  async get(name: string): Promise<string | null> {
    const secret = this.secrets.get(name);
    return secret && secret.expiresAt.getTime() > Date.now() ? secret.value : null;
  }

  async delete(name: string): Promise<void> {
    this.secrets.delete(name);
  }
}
