/**
 * Where the Episode function gets the certificates it pins on the trainer link. The coordinator box's is
 * the bucket object it writes at start (`keys.trainerCertificate()`); replica box `replica-i`'s is in its
 * announcement under the run it follows (`keys.replica(run, 'replica-i')`: its address and certificate
 * together). Each of those keys is writable by that box's role alone (sst.config.ts), and the stack binds
 * each replica id to its fixed address, so a token goes only to an origin of the stack, over a connection
 * pinned to the certificate that origin's own box announced. Read at most once per invocation, so a
 * restarted box (a new certificate) is picked up by the next one.
 */
import { z } from 'zod';
import type { CertificatePin } from '../environments/policies/pinned-fetch.ts';
import { keys } from '../shared/keys.ts';
import type { ObjectStore } from '../shared/ports/object-store.ts';
import { ReplicaAnnouncement, ReplicaId } from '../shared/schemas/index.ts';
import { readJson } from '../shared/store/json.ts';
import { TrainerCertificate } from '../shared/schemas/trainer-certificate.ts';

/** `replica-1=https://host:port/v1,replica-2=…`: each replica box's id and the address the stack gave it. */
export const ReplicaUrls = z
  .string()
  .default('')
  .transform((s) => s.split(',').map((pair) => pair.trim()).filter(Boolean))
  .pipe(
    z.array(
      z
        .string()
        .regex(/^[^=]+=[^=]+$/, 'id=url')
        .transform((pair) => pair.split('=') as [string, string])
        .pipe(z.tuple([ReplicaId, z.url({ protocol: /^https?$/ })])),
    ),
  )
  .transform((pairs) => Object.fromEntries(pairs));

export interface TrainerPins {
  /** The coordinator box's origin (https://host:port): pinned to `keys.trainerCertificate()`. */
  coordinatorOrigin: string;
  /** A reader for one invocation (each object read at most once): the pin of `origin` for `run`, or a clear error. */
  session(): (run: string, origin: string) => Promise<CertificatePin>;
}

/** The trainer link as the function's environment describes it: which origins may get the token, and their pins. */
export interface TrainerLink {
  /** The coordinator's and every replica box's origin (undefined: no trainer configured). */
  tokenOrigins?: string[];
  /** Set when the trainer is https: every server the token goes to is pinned. */
  pins?: TrainerPins;
}

/** The schema's verdict rather than its throw, so each reader says what is wrong in its own words. */
const checked = <T>(schema: z.ZodType<T>) => ({ parse: (value: unknown) => schema.safeParse(value) });

/** `replicaUrls`: replica id → its base URL (the stack's ESOPT_REPLICA_URLS). */
export function storeTrainerPins(store: ObjectStore, trainerUrl: string, replicaUrls: Record<string, string> = {}): TrainerPins {
  const coordinatorOrigin = new URL(trainerUrl).origin;
  const replicaAt = new Map(Object.entries(replicaUrls).map(([id, url]) => [new URL(url).origin, id]));
  const coordinator = async (): Promise<CertificatePin> => {
    const parsed = await readJson(store, keys.trainerCertificate(), checked(TrainerCertificate));
    if (parsed === null) throw new Error(`the trainer at ${coordinatorOrigin} has not published its certificate (${keys.trainerCertificate()}): is esopt trainer-box running?`);
    if (!parsed.success) throw new Error(`${keys.trainerCertificate()} is not a trainer certificate: ${parsed.error.issues[0]?.message}`);
    return parsed.data;
  };
  const replica = async (run: string, id: string, origin: string): Promise<CertificatePin> => {
    const key = keys.replica(run, id);
    const parsed = await readJson(store, key, checked(ReplicaAnnouncement));
    if (parsed === null) throw new Error(`refusing to call ${origin}: ${id} has not announced itself for run ${run} (${key})`);
    if (!parsed.success) throw new Error(`refusing to call ${origin}: ${key} is not a replica announcement: ${parsed.error.issues[0]?.message}`);
    const announced = parsed.data;
    if (announced.id !== id || new URL(announced.baseUrl).origin !== origin) throw new Error(`refusing to call ${origin}: ${key} announces ${announced.id} at ${new URL(announced.baseUrl).origin}, not ${id} at ${origin}`);
    if (!announced.tls) throw new Error(`refusing to call ${origin}: ${id}'s announcement for run ${run} has no certificate to pin`);
    return announced.tls;
  };
  return {
    coordinatorOrigin,
    session() {
      let mine: Promise<CertificatePin> | undefined;
      const read = new Map<string, Promise<CertificatePin>>();
      return async (run, origin) => {
        if (origin === coordinatorOrigin) return (mine ??= coordinator());
        const id = replicaAt.get(origin);
        if (!id) throw new Error(`refusing to call ${origin}: it is not one of the stack's trainer boxes (${[coordinatorOrigin, ...replicaAt.keys()].join(', ')})`);
        const at = `${run} ${id}`;
        if (!read.has(at)) read.set(at, replica(run, id, origin));
        return read.get(at)!;
      };
    },
  };
}

/** ESOPT_TRAINER_URL (the coordinator box) and ESOPT_REPLICA_URLS (the replica boxes), as the stack sets them. */
export function trainerLinkFromEnv(store: ObjectStore, env: { ESOPT_TRAINER_URL?: string; ESOPT_REPLICA_URLS?: Record<string, string> }): TrainerLink {
  const trainerUrl = env.ESOPT_TRAINER_URL;
  if (!trainerUrl) return {};
  const replicaUrls = env.ESOPT_REPLICA_URLS ?? {};
  return {
    tokenOrigins: [trainerUrl, ...Object.values(replicaUrls)].map((u) => new URL(u).origin),
    pins: trainerUrl.startsWith('https:') ? storeTrainerPins(store, trainerUrl, replicaUrls) : undefined,
  };
}
