/**
 * The coordinator's view of the trainer replicas of a run. Before iteration k it checks that every
 * replica that served iteration k−1 reports the coordinator's θ_k hash (a mismatch stops the run, naming
 * the replicas), drops the ones that did not report in time, and routes iteration k's members over
 * itself and the replicas that report θ_k — late joiners included. Antithetic twins share a replica, so
 * each replica's engine switches between a pair back to back.
 */
import { keys } from '../../../shared/keys.ts';
import type { ObjectStore } from '../../../shared/ports/object-store.ts';
import { readJson } from '../../../shared/store/json.ts';
import { MemberRoutes, ReplicaAnnouncement, ReplicaReport, type Member } from '../../../shared/schemas/index.ts';

export class ReplicaMismatchError extends Error {}

export interface ReplicaSetOptions {
  store: ObjectStore;
  run: string;
  /** The coordinator's own server, as the workers reach it (…/v1). */
  self: { id: string; baseUrl: string };
  /** How long a replica that served the previous iteration may take to report its θ hash before it is dropped. */
  syncTimeoutMs: number;
  pollMs: number;
  /** Replicas (besides the coordinator) to wait for, up to syncTimeoutMs, before the first iteration this process plans. */
  expected?: number;
  /** A replica that served the previous iteration and did not report in time (dropped from routing until it reports again). */
  onLost?: (info: { iteration: number; replica: string }) => void;
  /** The coordinator's lease on the run (coordinator-lease.ts), checked before each iteration is planned. */
  lease?: { check(): Promise<void> };
}

/** Members over replicas: antithetic twins (same noise index) together, groups dealt round-robin in index order. */
export function routeMembers(members: readonly Member[], replicas: ReadonlyArray<{ id: string; baseUrl: string }>): MemberRoutes {
  const groups = new Map<number, number[]>();
  for (const m of [...members].sort((a, b) => a.index - b.index)) groups.set(m.noiseIndex, [...(groups.get(m.noiseIndex) ?? []), m.index]);
  const routes = [...groups.values()].flatMap((group, g) => group.map((member) => ({ member, replica: g % replicas.length })));
  return MemberRoutes.parse({ replicas, routes: routes.sort((a, b) => a.member - b.member) });
}

/** The worker-side endpoint of one member: its replica first, then the others as fallbacks. */
export function endpointOf(routing: MemberRoutes, member: number): { baseUrl: string; fallbackUrls: string[] } {
  const route = routing.routes.find((r) => r.member === member);
  if (!route) throw new Error(`member ${member} has no route`);
  const primary = routing.replicas[route.replica];
  return { baseUrl: primary.baseUrl, fallbackUrls: routing.replicas.filter((r) => r !== primary).map((r) => r.baseUrl) };
}

export class ReplicaSet {
  /** The replicas (other than the coordinator) that served the last planned iteration. */
  private serving: string[] = [];
  private planned = false;

  constructor(private readonly o: ReplicaSetOptions) {}

  /**
   * Routing for iteration k, whose θ hashes to `thetaHash`. Waits for the reports of the replicas that
   * served iteration k−1 (up to syncTimeoutMs) and throws ReplicaMismatchError if any replica reports
   * another θ.
   */
  async plan(k: number, thetaHash: string, members: readonly Member[]): Promise<MemberRoutes> {
    await this.o.lease?.check();
    const agreeing = await this.check(k, thetaHash);
    const announced = await this.announcements();
    const replicas = [this.o.self, ...agreeing.filter((id) => announced.has(id)).sort().map((id) => ({ id, baseUrl: announced.get(id)!.baseUrl }))];
    this.serving = replicas.slice(1).map((r) => r.id);
    return routeMembers(members, replicas);
  }

  /**
   * Checks the reports of θ before iteration k against the coordinator's; returns the replicas that agree.
   * Call with k = iterations after the last update, so the end of a run is checked too.
   */
  async check(k: number, thetaHash: string): Promise<string[]> {
    const waitFor = new Set(this.serving);
    const atLeast = this.planned ? 0 : (this.o.expected ?? 0);
    this.planned = true;
    const deadline = Date.now() + this.o.syncTimeoutMs;
    let reports = await this.reports(k);
    while (([...waitFor].some((id) => !reports.has(id)) || reports.size < atLeast) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, this.o.pollMs));
      reports = await this.reports(k);
    }
    const differing = [...reports.values()].filter((r) => r.thetaHash !== thetaHash);
    if (differing.length) {
      const who = differing.map((r) => `${r.id} has ${r.thetaHash}`).join(', ');
      throw new ReplicaMismatchError(`run ${this.o.run}: replicas disagree on θ before iteration ${k}: the coordinator has ${thetaHash}, ${who}; stop them and restart them from the log`);
    }
    for (const id of waitFor) if (!reports.has(id)) this.o.onLost?.({ iteration: k, replica: id });
    return [...reports.keys()];
  }

  private async reports(k: number): Promise<Map<string, ReplicaReport>> {
    const out = new Map<string, ReplicaReport>();
    for (const key of await this.o.store.list(keys.replicaReports(this.o.run, k))) {
      const r = await readJson(this.o.store, key, { parse: (v) => ReplicaReport.safeParse(v) });
      if (r?.success && r.data.iteration === k) out.set(r.data.id, r.data);
    }
    return out;
  }

  private async announcements(): Promise<Map<string, ReplicaAnnouncement>> {
    const out = new Map<string, ReplicaAnnouncement>();
    for (const key of await this.o.store.list(keys.replicas(this.o.run))) {
      const a = await readJson(this.o.store, key, { parse: (v) => ReplicaAnnouncement.safeParse(v) });
      if (a?.success) out.set(a.data.id, a.data);
    }
    return out;
  }
}
