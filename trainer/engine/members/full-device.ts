/**
 * Full mode on a WebGPU device with the run's noise 'esopt-device-noise': θ is uploaded to the device once
 * per θ version (at load, and after each update or refresh: the update itself runs on the host, then one
 * upload), and a member's weights are made there by the device noise graph (device-noise-graph.ts) from θ's
 * pieces, each group's first stream index and its key block's two keys, so a member switch moves keys and
 * scalars, never θ. The base row feeds θ itself; a member's tensors are released when its rows finish. The
 * device holds θ and one member's weights (2×θ); the host keeps its own θ, which the updates write.
 * The decoder takes its weights as pieces (weight-pieces.ts), the form the noise graph makes them in; the
 * targeted pieces are made in groups (engine/perturbation/noise-groups.ts), one graph run a group, since each of
 * the graph's nodes is a kernel dispatch of its own whatever its tensor's size.
 */
import * as ort from 'onnxruntime-node';
import { BLOCK, deviceNoiseKeys } from '../../../shared/device-noise.ts';
import type { Member } from '../../../shared/schemas/index.ts';
import type { EngineUpdate, Population } from '../engine.ts';
import { countedRun, noCrossings } from '../generation/crossings.ts';
import { DeviceTensors } from '../generation/device-tensors.ts';
import { profiling } from '../onnx/session-profile.ts';
import { encodeModel } from '../onnx/proto.ts';
import { deviceNoiseGraph, groupedDeviceNoiseGraph } from '../perturbation/device-noise-graph.ts';
import { DEFAULT_GROUP_ELEMENTS, type NoiseGroup, noiseGroups } from '../perturbation/noise-groups.ts';
import type { WeightPiece } from '../perturbation/weight-pieces.ts';
import { applyFullUpdate, type FullModeTheta } from './full-mode-switch.ts';
import type { DecodeRows, MemberWeights } from './member-weights.ts';

/** Host ↔ device bytes the route moved outside decode steps: θ's uploads, and the member switches' feeds. */
export interface SwitchTransfer {
  /** Member weights made on the device. */
  switches: number;
  /** Bytes of the host tensors the noise-graph runs were fed to make them (stream offsets, keys, σ), counted at each run. */
  switchHostToDevice: number;
  /** Bytes of the host tensors those runs returned (their outputs are asked for on the device), counted at each run. */
  switchDeviceToHost: number;
  /** θ's uploads (one per θ version) and the host bytes those upload runs were fed, counted at the runs. */
  thetaUploads: number;
  thetaBytes: number;
  /** Noise graph runs, and the graph nodes they ran (each node one kernel dispatch or more, on the WebGPU provider). */
  noiseRuns: number;
  noiseNodes: number;
}

/** A noise graph's session and its node count. */
interface NoiseSession {
  session: ort.InferenceSession;
  nodes: number;
}

const uint32 = (v: number) => new ort.Tensor('uint32', Uint32Array.of(v), [1]);

export class FullDeviceMembers implements MemberWeights {
  private population: Population | null = null;
  /** θ on the device, by piece input; null until uploaded. */
  private theta: Record<string, ort.Tensor> | null = null;
  private readonly counts: SwitchTransfer = { switches: 0, switchHostToDevice: 0, switchDeviceToHost: 0, thetaUploads: 0, thetaBytes: 0, noiseRuns: 0, noiseNodes: 0 };
  /** Grouped noise sessions by their pieces' lengths, made once per engine. */
  private readonly grouped = new Map<string, Promise<NoiseSession>>();
  /** The groups of each population's targets, by the targeted segments. */
  private readonly groupsByTargets = new Map<string, NoiseGroup[]>();

  private constructor(
    private readonly t: FullModeTheta,
    /** The decoder, its weights as pieces. */
    private readonly session: ort.InferenceSession,
    /** The one-piece graph: a group of one piece runs it. */
    private readonly noise: NoiseSession,
    /** θ's and the members' gpu-buffer tensors, counted until disposed. */
    private readonly device: DeviceTensors,
    /** Per θ segment, its pieces. */
    private readonly pieces: WeightPiece[][],
    /** The most elements one graph run makes (noise-groups.ts). */
    private readonly groupElements: number,
    /** Where the noise sessions write onnxruntime profiles; absent: not profiled. */
    private readonly profileDir?: string,
  ) {}

  /** `groupElements`: the most elements a group of pieces made by one graph run (1: a run per piece). */
  static async create(t: FullModeTheta, session: ort.InferenceSession, pieces: WeightPiece[][], groupElements = DEFAULT_GROUP_ELEMENTS, profileDir?: string): Promise<FullDeviceMembers> {
    noiseGroups([], groupElements); // its range is checked before anything is made
    const graph = deviceNoiseGraph();
    const noise = { session: await ort.InferenceSession.create(encodeModel(graph), { executionProviders: ['webgpu'], preferredOutputLocation: { perturbed: 'gpu-buffer' }, ...profiling(profileDir) }), nodes: graph.graph.node.length };
    const members = new FullDeviceMembers(t, session, noise, await DeviceTensors.create({ layers: 0, profileDir }), pieces, groupElements, profileDir);
    await members.upload();
    return members;
  }

  /** What this route moved so far outside the decode steps. */
  get transfer(): SwitchTransfer {
    return { ...this.counts };
  }

  /** gpu-buffer tensors this route holds: θ's pieces between calls (a member's are released after its rows). */
  get liveTensors(): number {
    return this.device.live;
  }

  /** θ's pieces to the device, replacing the copy of the previous θ version. */
  private async upload(): Promise<void> {
    if (this.theta) this.device.dispose(Object.values(this.theta));
    this.theta = null;
    const feeds: Record<string, ort.Tensor> = {};
    this.pieces.forEach((ps, si) => {
      const data = this.t.segments[si].data;
      for (const p of ps) feeds[p.input] = new ort.Tensor('float32', data.subarray(p.start, p.start + p.count), [p.count]);
    });
    const before = this.device.crossed.hostToDevice;
    this.theta = await this.device.upload(feeds);
    this.counts.thetaUploads++;
    this.counts.thetaBytes += this.device.crossed.hostToDevice - before;
  }

  async generate(members: ReadonlyArray<Member | null>, decode: DecodeRows): Promise<void> {
    // base first, then by noise index with + before −, as the host route orders them
    const groups = new Map<number, number[]>();
    members.forEach((m, i) => groups.set(m ? m.index : -1, [...(groups.get(m ? m.index : -1) ?? []), i]));
    const order = [...groups.values()].map((rows) => ({ rows, member: members[rows[0]] }));
    order.sort((a, b) => (a.member?.noiseIndex ?? -1) - (b.member?.noiseIndex ?? -1) || (b.member?.sign ?? 0) - (a.member?.sign ?? 0));
    for (const { rows, member } of order) await this.withMember(member, (feeds) => decode(this.session, rows, () => feeds));
  }

  /**
   * `fn` with the decoder's weight inputs of `member` (null: θ) on the device, by piece input; a member's
   * made tensors are released when `fn` settles.
   */
  async withMember<T>(member: Member | null, fn: (feeds: Record<string, ort.Tensor>) => Promise<T>): Promise<T> {
    const theta = this.theta;
    if (!theta) throw new Error("θ is not on the device (an earlier upload failed): refresh the engine's weights");
    if (!member) return fn(theta);
    const made = await this.memberWeights(theta, member);
    try {
      return await fn({ ...theta, ...made });
    } finally {
      this.device.dispose(Object.values(made));
    }
  }

  /** The member's targeted pieces, fl32(θ + fl32(sign·σ·ε)) made on the device (untargeted ones feed θ's). */
  private async memberWeights(theta: Record<string, ort.Tensor>, member: Member): Promise<Record<string, ort.Tensor>> {
    const p = this.population!;
    if (p.noise !== 'esopt-device-noise') throw new Error(`this engine makes its members on the device, from the noise "esopt-device-noise"; the population's is "${p.noise ?? 'esopt-noise'}"`);
    const chosen = this.t.targets.select(p.targets);
    const key = { runSeed: p.runSeed, iteration: p.iteration, member: member.noiseIndex };
    const sigma = new ort.Tensor('float32', Float32Array.of(member.sign * p.sigma), [1]);
    const made: Record<string, ort.Tensor> = {};
    const crossed = noCrossings();
    try {
      for (const group of this.groupsOf(chosen)) {
        const block = Math.floor(group.offset / BLOCK);
        const [k0, k1] = deviceNoiseKeys(key, block);
        const host = { offset: uint32(group.offset - block * BLOCK), k0: uint32(k0), k1: uint32(k1), sigma };
        const one = group.pieces.length === 1;
        const noise = one ? this.noise : await this.groupedSession(group);
        const thetas = one ? { theta: theta[group.pieces[0].input] } : Object.fromEntries(group.pieces.map((p, j) => [`theta.${j}`, theta[p.input]]));
        const out = await countedRun(noise.session, { ...thetas, ...host }, crossed);
        const outputs = one ? [out.perturbed] : group.pieces.map((_, j) => out[`perturbed.${j}`]);
        this.device.adopt(outputs);
        group.pieces.forEach((p, j) => (made[p.input] = outputs[j]));
        this.counts.noiseRuns++;
        this.counts.noiseNodes += noise.nodes;
      }
    } catch (err) {
      this.device.dispose(Object.values(made));
      throw err;
    }
    // counted at the runs: a feed or output on the host crossed, a gpu-buffer one (θ's pieces, the member's) did not
    this.counts.switchHostToDevice += crossed.hostToDevice;
    this.counts.switchDeviceToHost += crossed.deviceToHost;
    this.counts.switches++;
    return made;
  }

  /** The groups of the targeted segments' pieces (`chosen` null: all of them), computed once per target set. */
  private groupsOf(chosen: ReadonlySet<number> | null): NoiseGroup[] {
    const id = chosen ? [...chosen].sort((a, b) => a - b).join(',') : 'all';
    let groups = this.groupsByTargets.get(id);
    if (!groups) {
      groups = noiseGroups(this.pieces.map((ps, si) => (chosen && !chosen.has(si) ? null : ps)), this.groupElements);
      this.groupsByTargets.set(id, groups);
    }
    return groups;
  }

  /** The grouped graph for the group's piece lengths, its session made on first use and kept. */
  private groupedSession(group: NoiseGroup): Promise<NoiseSession> {
    const lengths = group.pieces.map((p) => p.count);
    const id = lengths.join(',');
    let made = this.grouped.get(id);
    if (!made) {
      const graph = groupedDeviceNoiseGraph(lengths);
      made = ort.InferenceSession.create(encodeModel(graph), { executionProviders: ['webgpu'], preferredOutputLocation: 'gpu-buffer', ...profiling(this.profileDir) }).then((session) => ({ session, nodes: graph.graph.node.length }));
      // a failed creation is not kept: the next switch tries again
      made.catch(() => this.grouped.delete(id));
      this.grouped.set(id, made);
    }
    return made;
  }

  setPopulation(p: Population | null): void {
    if (p && p.noise !== 'esopt-device-noise') throw new Error(`this engine makes its members on the device from the noise "esopt-device-noise" (EngineOptions.noise); a population on "${p.noise ?? 'esopt-noise'}" needs an engine made without it`);
    this.population = p;
  }

  /** θ was written on the host: the device's copy is of another version. */
  async refresh(): Promise<void> {
    await this.upload();
  }

  async applyUpdate(u: EngineUpdate): Promise<void> {
    applyFullUpdate(this.t, u);
    await this.upload();
  }

  async close(): Promise<void> {
    if (this.theta) this.device.dispose(Object.values(this.theta));
    this.theta = null;
    await this.device.release();
    await this.noise.session.release();
    for (const made of this.grouped.values()) await made.then((n) => n.session.release(), () => undefined);
    this.grouped.clear();
    await this.t.switcher.close();
    await this.session.release();
  }
}
