/**
 * Where the Episode function gets the trainer's certificate to pin: the bucket object the trainer box
 * writes at start (`keys.trainerCertificate()`), which only the box's role may write. Read once per
 * invocation, so a restarted box (a new certificate) is picked up by the next invocation.
 */
import { keys } from '../shared/keys.ts';
import type { ObjectStore } from '../shared/ports/object-store.ts';
import { TrainerCertificate } from '../shared/schemas/trainer-certificate.ts';

export interface TrainerCertificateSource {
  /** The trainer's origin (https://host:port): the one origin whose certificate is pinned. */
  origin: string;
  read(): Promise<TrainerCertificate>;
}

export function storeCertificateSource(store: ObjectStore, trainerUrl: string): TrainerCertificateSource {
  const origin = new URL(trainerUrl).origin;
  return {
    origin,
    async read() {
      const body = await store.get(keys.trainerCertificate());
      if (body === null) throw new Error(`the trainer at ${origin} has not published its certificate (${keys.trainerCertificate()}): is esopt trainer-box running?`);
      const parsed = TrainerCertificate.safeParse(JSON.parse(new TextDecoder().decode(body)));
      if (!parsed.success) throw new Error(`${keys.trainerCertificate()} is not a trainer certificate: ${parsed.error.issues[0]?.message}`);
      return parsed.data;
    },
  };
}
