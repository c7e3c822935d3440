/**
 * The trainer box's TLS certificate as it publishes it in the bucket (`keys.trainerCertificate()`), where
 * only the box's role may write: the Episode function pins exactly this certificate (its SHA-256
 * fingerprint) when it calls the box, so no other server can receive the bearer token.
 */
import { z } from 'zod';

export const CertificateFingerprint = z.string().regex(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/, 'a SHA-256 fingerprint as AA:BB:… (32 bytes)');

export const TrainerCertificate = z.object({
  /** PEM, self-signed by the box at start. */
  certificate: z.string().startsWith('-----BEGIN CERTIFICATE-----'),
  sha256: CertificateFingerprint,
  publishedAt: z.iso.datetime(),
});
export type TrainerCertificate = z.infer<typeof TrainerCertificate>;
