/**
 * Host ↔ device bytes per decode step as MEASURED on a provider: an engine decodes rows of base and
 * weights (base and members in low-rank mode, θ's own in full mode) and reports, after every step, the bytes of the host tensors it fed and fetched
 * (EngineOptions.onDecodeStep); a tensor left on the device counts nothing. Run once with the KV caches
 * on the device (the webgpu route) and once on the host (the route before), in low-rank mode (factors per
 * row) and full mode with θ as inputs. Copies onnxruntime makes inside a session, for nodes its provider
 * has no kernel for (shape ops, int64 ops), are read apart from onnxruntime's session profiling of every
 * session the engine made (its MemcpyFromHost / MemcpyToHost node runs and their bytes: `memcpy_nodes`; on
 * the CPU provider there are none, a measured zero with `profiles` > 0), and the gpu-buffer moves the
 * engine's own device sessions made (uploads of a batch's extra inputs, gathers' row indices, downloads for
 * the prefix cache) are counted at those runs (`gpu_buffer_moves`). The three are kept apart, not summed:
 * a host feed a CPU kernel reads, then copied up by a Memcpy node, would otherwise count twice.
 *
 * Full mode's member switch apart (`measureMemberSwitches`): the bytes a switch to a member moves, on the
 * host route (the member perturbed on the host, θ's tensors uploaded with its batch) and on the device
 * route with the run noise 'esopt-device-noise' (θ on the device, the member made there from keys and σ).
 */
import type { ExecutionProvider } from '../../../shared/execution-provider.ts';
import type { LocalModelSpec } from '../../../shared/schemas/index.ts';
import { ask } from '../../../shared/es.ts';
import { openEngine, openEngineOn } from '../../assembly/engine.ts';
import { openModel } from '../../engine/model/open-model.ts';
import type { EngineOptions, GenerateRow, Population, StepTransfer } from '../../engine/engine.ts';
import { memcpyInDir, noMemcpy, profileDir, type MemcpyBytes } from '../../engine/onnx/session-profile.ts';
import { noCrossings, type Crossings } from '../../engine/generation/crossings.ts';
import { rmSync } from 'node:fs';

/** What a step's named tensors are, for the report. */
export type TransferKind = 'token_ids' | 'positions' | 'attention_mask' | 'kv_caches' | 'logits' | 'weights' | 'factors' | 'uploads' | 'row_indices';

export type KindBytes = Partial<Record<TransferKind, number>>;

export interface MeasuredRoute {
  kv_on_device: boolean;
  /** Mean bytes of a one-token step, by kind, host → device and device → host. */
  decode_step: { host_to_device: KindBytes; device_to_host: KindBytes; total_bytes: number };
  /** The prefill step (the whole prompt), the same way. */
  prefill_step: { host_to_device: KindBytes; device_to_host: KindBytes; total_bytes: number };
  /** A decode step's bytes ÷ the goal's (the last position's logits out, the token ids in). */
  over_goal: number;
  decode_steps: number;
  /** onnxruntime's Memcpy node runs in all of the engine's sessions over the whole call (prefill, decode steps, device moves), from session profiling. */
  memcpy_nodes: MemcpyBytes;
  /** Host bytes fed to and fetched from the engine's own device sessions over the call, counted at those runs; null: no device sessions. */
  gpu_buffer_moves: Crossings | null;
}

export interface MeasuredWay {
  way: 'lowrank' | 'full-inputs';
  /** The goal per decode step: the last position's logits (device → host) and the token ids (host → device). */
  goal_bytes: number;
  routes: MeasuredRoute[];
}

function kindOf(name: string, mode: EngineOptions['mode']): TransferKind {
  if (name === 'input_ids') return 'token_ids';
  if (name === 'position_ids') return 'positions';
  if (name === 'attention_mask') return 'attention_mask';
  if (name === 'logits') return 'logits';
  if (name === 'uploaded') return 'uploads';
  if (name === 'rows') return 'row_indices';
  if (name.startsWith('past_key_values.') || name.startsWith('present.')) return 'kv_caches';
  return mode === 'lowrank' ? 'factors' : 'weights';
}

function byKind(m: Record<string, number>, mode: EngineOptions['mode']): KindBytes {
  const out: KindBytes = {};
  for (const [name, bytes] of Object.entries(m)) out[kindOf(name, mode)] = (out[kindOf(name, mode)] ?? 0) + bytes;
  return out;
}

function mean(steps: StepTransfer[], mode: EngineOptions['mode']) {
  const sum = (pick: (s: StepTransfer) => Record<string, number>): KindBytes => {
    const total: KindBytes = {};
    for (const s of steps) for (const [k, v] of Object.entries(byKind(pick(s), mode))) total[k as TransferKind] = (total[k as TransferKind] ?? 0) + v;
    return Object.fromEntries(Object.entries(total).map(([k, v]) => [k, Math.round(v / Math.max(1, steps.length))]));
  };
  const host_to_device = sum((s) => s.hostToDevice);
  const device_to_host = sum((s) => s.deviceToHost);
  const total = (k: KindBytes) => Object.values(k).reduce((a, b) => a + (b ?? 0), 0);
  return { host_to_device, device_to_host, total_bytes: total(host_to_device) + total(device_to_host) };
}

/**
 * `batch` greedy rows of `prompt` prompt tokens and `newTokens` new tokens each, half of them members where
 * `members` (low-rank mode serves them in the same batch; full mode would split the batch by member).
 */
function rows(batch: number, prompt: number, newTokens: number, members: boolean): GenerateRow[] {
  return Array.from({ length: batch }, (_, b) => ({
    promptIds: Array.from({ length: prompt }, (_, j) => (b * 31 + j * 7 + 1) % 256),
    member: !members || b % 2 === 0 ? { kind: 'base' as const } : { kind: 'member' as const, iteration: 0, index: (b >> 1) % 4 },
    sampling: { temperature: 0, topP: 1, topK: 0, seed: b },
    maxNewTokens: newTokens,
    stop: [],
    ignoreEos: true,
  }));
}

export async function measureTransfers(o: { model: LocalModelSpec; provider: ExecutionProvider; batch: number; prompt: number; newTokens: number; rank: number }): Promise<MeasuredWay[]> {
  const population: Population = { runSeed: 1, iteration: 0, sigma: 0.01, rank: o.rank, members: ask({ population: 4, antithetic: true }) };
  const ways: MeasuredWay[] = [];
  for (const way of ['lowrank', 'full-inputs'] as const) {
    const mode: EngineOptions['mode'] = way === 'lowrank' ? 'lowrank' : 'full';
    const routes: MeasuredRoute[] = [];
    let goal = 0;
    for (const kvOnDevice of [true, false]) {
      const steps: StepTransfer[] = [];
      const profiles = profileDir();
      let moves: Crossings | null = null;
      let memcpy: MemcpyBytes = noMemcpy();
      try {
        // the prefix cache off: what a row keeps for the next turn is not a decode step's traffic
        const engine = await openEngine({ model: o.model, executionProvider: o.provider, mode, fullModeWeights: 'inputs', kvOnDevice, prefixCacheBytes: 0, onDecodeStep: (t) => steps.push(t), profileDir: profiles });
        try {
          engine.setPopulation(population);
          await engine.generate(rows(o.batch, o.prompt, o.newTokens, mode === 'lowrank'));
          moves = 'deviceCrossings' in engine ? (engine.deviceCrossings as Crossings | null) : null;
        } finally {
          // onnxruntime writes a session's profile when the session is released
          await engine.close();
        }
        memcpy = memcpyInDir(profiles);
      } finally {
        rmSync(profiles, { recursive: true, force: true });
      }
      const decodeSteps = steps.filter((s) => s.hostToDevice.input_ids === s.rows * 8);
      const prefill = steps.filter((s) => s.hostToDevice.input_ids !== s.rows * 8);
      const d = mean(decodeSteps, mode);
      goal = (d.device_to_host.logits ?? 0) + (d.host_to_device.token_ids ?? 0);
      routes.push({ kv_on_device: kvOnDevice, decode_step: d, prefill_step: mean(prefill, mode), over_goal: d.total_bytes / goal, decode_steps: decodeSteps.length, memcpy_nodes: memcpy, gpu_buffer_moves: moves });
    }
    ways.push({ way, goal_bytes: goal, routes });
  }
  return ways;
}

export interface MemberSwitchRoute {
  route: 'host' | 'device-noise';
  /** Member groups decoded (each a switch to its weights), and the bytes per switch each way. */
  switches: number;
  host_to_device_per_switch: number;
  device_to_host_per_switch: number;
  /** θ's uploads outside the switches (the device route: one per θ version) and their bytes. */
  theta_uploads: number;
  theta_upload_bytes: number;
  /** Device route: runs of the noise graph per switch (one a group of pieces, each run's offset, keys and σ fed); host route: 0. */
  noise_runs_per_switch: number;
  /** Where each figure is counted: the noise-graph runs (device route), or the decode loop's device runs (host route: uploads, row indices). */
  counted_at: 'noise-graph runs' | 'decode-loop device runs';
  /** onnxruntime's Memcpy node runs in all of the engine's sessions over the call, from session profiling. */
  memcpy_nodes: MemcpyBytes;
}

/**
 * Full mode's member switch on `provider`: the same population (4 members and the base row) decoded on the
 * host route (run noise esopt-noise: θ's tensors go up with every member's batch, counted by the decode
 * loop) and on the device route (esopt-device-noise: the bytes the route fed to make each member).
 */
export async function measureMemberSwitches(o: { model: LocalModelSpec; provider: ExecutionProvider; batch: number; prompt: number; newTokens: number }): Promise<MemberSwitchRoute[]> {
  const members = ask({ population: 4, antithetic: true });
  const out: MemberSwitchRoute[] = [];
  // the device route exists on webgpu only (full-device.ts); elsewhere the host route is what a switch moves
  for (const route of o.provider === 'webgpu' ? (['host', 'device-noise'] as const) : (['host'] as const)) {
    const noise = route === 'device-noise' ? ('esopt-device-noise' as const) : undefined;
    const profiles = profileDir();
    const engine = await openEngineOn(openModel(o.model), { model: o.model, executionProvider: o.provider, mode: 'full', fullModeWeights: 'inputs', prefixCacheBytes: 0, ...(noise ? { noise } : {}), profileDir: profiles });
    let route_: Omit<MemberSwitchRoute, 'memcpy_nodes'> | null = null;
    try {
      if (route === 'device-noise' && engine.memberRoute !== 'device') throw new Error(`the device route is not taken on ${o.provider} (see the ESOPT_MEMBER_ROUTE warning)`);
      engine.setPopulation({ runSeed: 1, iteration: 0, sigma: 0.01, rank: 1, ...(noise ? { noise } : {}), members });
      const r = rows(o.batch, o.prompt, o.newTokens, true);
      await engine.generate(r);
      const groups = new Set(r.map((row) => (row.member.kind === 'base' ? -1 : row.member.index))).size;
      const t = engine.switchTransfer;
      // the host route makes a member on the host; its weights go up with each member group's batch through the
      // decode loop's device runs (uploads, and the gathers' row indices when rows leave), counted at those runs
      const moved = engine.deviceCrossings ?? noCrossings();
      route_ = t
        ? { route, switches: t.switches, host_to_device_per_switch: t.switchHostToDevice / Math.max(1, t.switches), device_to_host_per_switch: t.switchDeviceToHost / Math.max(1, t.switches), theta_uploads: t.thetaUploads, theta_upload_bytes: t.thetaBytes, noise_runs_per_switch: t.noiseRuns / Math.max(1, t.switches), counted_at: 'noise-graph runs' }
        : { route, switches: groups, host_to_device_per_switch: moved.hostToDevice / groups, device_to_host_per_switch: moved.deviceToHost / groups, theta_uploads: 0, theta_upload_bytes: 0, noise_runs_per_switch: 0, counted_at: 'decode-loop device runs' };
    } finally {
      await engine.close();
      try {
        if (route_) out.push({ ...route_, memcpy_nodes: memcpyInDir(profiles) });
      } finally {
        rmSync(profiles, { recursive: true, force: true });
      }
    }
  }
  return out;
}
