/**
 * Where the Episode function gets the certificates it pins on the trainer link. The coordinator box's is
 * the bucket object it writes at start (`keys.trainerCertificate()`); each trainer replica's is in its
 * announcement under the run (`keys.replica(run, id)`: origin and certificate together). Only the boxes'
 * roles may write either, so a request can only reach, and hand the token to, a server that one of them
 * announced for exactly that origin. Read at most once per invocation, so a restarted box (a new
 * certificate) is picked up by the next one.
 */
import type { CertificatePin } from '../environments/policies/pinned-fetch.ts';
import { keys } from '../shared/keys.ts';
import type { ObjectStore } from '../shared/ports/object-store.ts';
import { ReplicaAnnouncement } from '../shared/schemas/index.ts';
import { TrainerCertificate } from '../shared/schemas/trainer-certificate.ts';

export interface TrainerPins {
  /** The coordinator box's origin (https://host:port): pinned to `keys.trainerCertificate()`. */
  coordinatorOrigin: string;
  /** A reader for one invocation (each object read at most once): the pin of `origin` for `run`, or a clear error. */
  session(): (run: string, origin: string) => Promise<CertificatePin>;
}

/** The trainer link as the Lambda's environment describes it: which origins may get the token, and their pins. */
export interface TrainerLink {
  /** The deploy-time fence: the coordinator's and every replica box's origin (undefined: no trainer configured). */
  tokenOrigins?: string[];
  /** Set when the trainer is https: every server the token goes to is pinned. */
  pins?: TrainerPins;
}

const decoder = new TextDecoder();

export function storeTrainerPins(store: ObjectStore, trainerUrl: string): TrainerPins {
  const coordinatorOrigin = new URL(trainerUrl).origin;
  const coordinator = async (): Promise<CertificatePin> => {
    const body = await store.get(keys.trainerCertificate());
    if (body === null) throw new Error(`the trainer at ${coordinatorOrigin} has not published its certificate (${keys.trainerCertificate()}): is esopt trainer-box running?`);
    const parsed = TrainerCertificate.safeParse(JSON.parse(decoder.decode(body)));
    if (!parsed.success) throw new Error(`${keys.trainerCertificate()} is not a trainer certificate: ${parsed.error.issues[0]?.message}`);
    return parsed.data;
  };
  /** Origin → the newest announcement's certificate among the run's replicas (a restarted box overwrites its own). */
  const announced = async (run: string): Promise<Map<string, ReplicaAnnouncement>> => {
    const byOrigin = new Map<string, ReplicaAnnouncement>();
    for (const key of await store.list(keys.replicas(run))) {
      const body = await store.get(key);
      const a = body && ReplicaAnnouncement.safeParse(JSON.parse(decoder.decode(body)));
      if (!a || !a.success || !a.data.tls) continue;
      const origin = new URL(a.data.baseUrl).origin;
      const seen = byOrigin.get(origin);
      if (!seen || seen.startedAt < a.data.startedAt) byOrigin.set(origin, a.data);
    }
    return byOrigin;
  };
  return {
    coordinatorOrigin,
    session() {
      let mine: Promise<CertificatePin> | undefined;
      const runs = new Map<string, Promise<Map<string, ReplicaAnnouncement>>>();
      return async (run, origin) => {
        if (origin === coordinatorOrigin) return (mine ??= coordinator());
        let read = runs.get(run);
        if (!read) runs.set(run, (read = announced(run)));
        const announcement = (await read).get(origin);
        if (!announcement?.tls) throw new Error(`refusing to call ${origin}: no trainer replica announced it with a certificate for run ${run} (${keys.replicas(run)})`);
        return announcement.tls;
      };
    },
  };
}

/** ESOPT_TRAINER_URL (the coordinator box) and ESOPT_REPLICA_URLS (comma-separated replica boxes), as the stack sets them. */
export function trainerLinkFromEnv(store: ObjectStore, env: { ESOPT_TRAINER_URL?: string; ESOPT_REPLICA_URLS?: string[] }): TrainerLink {
  const trainerUrl = env.ESOPT_TRAINER_URL;
  if (!trainerUrl) return {};
  return {
    tokenOrigins: [trainerUrl, ...(env.ESOPT_REPLICA_URLS ?? [])].map((u) => new URL(u).origin),
    pins: trainerUrl.startsWith('https:') ? storeTrainerPins(store, trainerUrl) : undefined,
  };
}
