/**
 * The inference server's TLS identity: a key pair and a self-signed certificate made at start (so no
 * private key is ever stored or shipped), whose SHA-256 fingerprint the clients pin. The trainer box
 * publishes the certificate in the bucket (`publishCertificate`), the channel the Episode function trusts.
 * `selfsigned` is imported when an identity is made, so runs that serve plain http never load it.
 */
import { X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import { keys } from '../../shared/keys.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { writeJson } from '../../shared/store/json.ts';
import { TrainerCertificate } from '../../shared/schemas/trainer-certificate.ts';

export interface TlsIdentity {
  key: string;
  cert: string;
  /** The certificate's SHA-256 fingerprint, AA:BB:… as node's X509Certificate prints it. */
  sha256: string;
}

/** A fresh P-256 key and a certificate for `hosts` (names or IP addresses), valid for a year. */
export async function createTlsIdentity(hosts: string[]): Promise<TlsIdentity> {
  const { generate } = await import('selfsigned');
  const altNames = hosts.map((h) => (isIP(h) ? { type: 7 as const, ip: h } : { type: 2 as const, value: h }));
  const pems = await generate([{ name: 'commonName', value: hosts[0] ?? 'esopt-trainer' }], {
    keyType: 'ec',
    algorithm: 'sha256',
    notAfterDate: new Date(Date.now() + 365 * 24 * 3600 * 1000),
    extensions: [{ name: 'subjectAltName', altNames }, { name: 'extKeyUsage', serverAuth: true }],
  });
  return { key: pems.private, cert: pems.cert, sha256: new X509Certificate(pems.cert).fingerprint256 };
}

/** Writes the certificate where the Episode function reads the pin (overwriting the previous start's). */
export async function publishCertificate(store: ObjectStore, identity: TlsIdentity): Promise<TrainerCertificate> {
  const published = TrainerCertificate.parse({ certificate: identity.cert, sha256: identity.sha256, publishedAt: new Date().toISOString() });
  await writeJson(store, keys.trainerCertificate(), published);
  return published;
}
