import { describe, expect, it } from 'vitest';
import { run, options, stepTransfers, transferShape } from '../../trainer/studies/bench/transfer.ts';
import { buildPreset } from '../../trainer/engine/model/open-model.ts';
import { parameterCount } from '../../trainer/engine/model/weights.ts';

describe('bytes the CUDA provider moves per decode step', () => {
  it('at Qwen3-0.6B\'s shape, as derived by hand from its config', () => {
    const t = stepTransfers(transferShape('qwen3-0.6b-shape'), 32, 1024, 1);
    // θ: 151,936 × 1,024 tied embedding + 28 layers × 15,730,944 + the final norm's 1,024, fp32
    expect(t.theta_as_inputs_bytes).toBe((151_936 * 1024 + 28 * 15_730_944 + 1024) * 4);
    // keys and values: 2 × 28 layers × 8 KV heads × 128 × 4 B a token and row
    expect(t.kv_bytes_per_token_row).toBe(229_376);
    expect(t.kv_cache_each_way_bytes).toBe(32 * 1024 * 229_376);
    expect(t.logits_bytes).toBe(32 * 151_936 * 4);
    // per row and rank: per layer A factors m·k (q/k/v 1,024·3, gate/up 1,024·2, o 2,048, down 3,072) and
    // block-diagonal B factors k·Σn (3·4,096, 2·6,144, 1,024, 1,024), 36,864 floats; the tied head 1,024 + 151,936
    expect(t.lowrank_factor_bytes).toBe(32 * (28 * 36_864 + 1024 + 151_936) * 4);
  });

  it('counts θ as the model holds it, and scales with batch, context and rank', () => {
    const model = buildPreset('tiny', 1);
    const one = stepTransfers(model, 1, 1, 1);
    expect(one.theta_as_inputs_bytes).toBe(parameterCount(model.weights) * 4);
    const more = stepTransfers(model, 3, 10, 2);
    expect(more.kv_cache_each_way_bytes).toBe(30 * one.kv_cache_each_way_bytes);
    expect(more.logits_bytes).toBe(3 * one.logits_bytes);
    expect(more.lowrank_factor_bytes).toBe(6 * one.lowrank_factor_bytes);
    expect(stepTransfers(transferShape('tiny'), 1, 1, 1)).toEqual(one);
  });

  it('measures on webgpu what each decode step feeds and fetches: on the device route logits out, ids, positions and mask in (or says why it could not)', async () => {
    const out = await run(options.parse({ model: 'tiny', batch: 4, prompt: 8, newTokens: 4 }), () => {});
    if (out.measured === null) {
      // no Vulkan adapter here (CI): the computed figures stand, and the result says why
      expect(out.measure_error).toMatch(/WebGPU adapter|No supported adapters/);
      return;
    }
    const vocab = buildPreset('tiny', 0).config.vocab_size;
    for (const way of out.measured) {
      expect(way.goal_bytes).toBe(4 * vocab * 4 + 4 * 8);
      const [device, host] = way.routes;
      expect([device.kv_on_device, host.kv_on_device]).toEqual([true, false]);
      // 3 one-token steps (the 4th token is sampled from the 3rd step's logits), the mask 4 rows × 9…11 columns
      expect(device.decode_steps).toBe(3);
      expect(device.decode_step.device_to_host).toEqual({ logits: 4 * vocab * 4 });
      expect(device.decode_step.host_to_device).toEqual({ token_ids: 32, positions: 32, attention_mask: 4 * 10 * 8 });
      // the host route moves the caches both ways, and θ or the factors every step
      expect(host.decode_step.device_to_host.kv_caches).toBeGreaterThan(0);
      expect(host.decode_step.host_to_device.kv_caches).toBeGreaterThan(0);
      expect(host.decode_step.host_to_device[way.way === 'lowrank' ? 'factors' : 'weights']).toBeGreaterThan(0);
      expect(host.over_goal).toBeGreaterThan(10 * device.over_goal);
      // onnxruntime's own copies inside the sessions, from their profiles: read, and the int64 mask's ops on the CPU copy something up
      for (const r of [device, host]) expect(r.memcpy_nodes.profiles).toBeGreaterThanOrEqual(1);
      expect(device.memcpy_nodes.host_to_device_runs).toBeGreaterThan(0);
      // the device route's moves, counted at its upload runs: θ or the factors once a batch, what the host route feeds every step
      expect(host.gpu_buffer_moves).toBeNull();
      expect(device.gpu_buffer_moves!.hostToDevice).toBe(host.decode_step.host_to_device[way.way === 'lowrank' ? 'factors' : 'weights']);
      expect(device.gpu_buffer_moves!.deviceToHost).toBe(0);
    }
    // full mode's member switch: θ's bytes with each member on the host route; keys and σ on the device route
    const thetaBytes = parameterCount(buildPreset('tiny', 0).weights) * 4;
    const [hostSwitch, deviceSwitch] = out.member_switch!;
    // 4 rows: the base row and members 0 and 1 (the host route counts the base row's batch too)
    // counted at the decode loop's device runs: θ up with each group's batch, nothing down
    expect(hostSwitch).toMatchObject({ route: 'host', switches: 3, host_to_device_per_switch: thetaBytes, device_to_host_per_switch: 0, counted_at: 'decode-loop device runs' });
    // counted at the runs: the noise graph's outputs stay on the device, θ's upload run was fed θ's bytes
    expect(deviceSwitch).toMatchObject({ route: 'device-noise', switches: 2, device_to_host_per_switch: 0, theta_uploads: 1, theta_upload_bytes: thetaBytes, counted_at: 'noise-graph runs' });
    expect(deviceSwitch.memcpy_nodes.profiles).toBeGreaterThanOrEqual(2);
    // one noise-graph run a group of pieces (tiny's θ fits one group): its offset, two keys and σ, 16 bytes
    expect(deviceSwitch.noise_runs_per_switch).toBeGreaterThanOrEqual(1);
    expect(deviceSwitch.noise_runs_per_switch).toBeLessThan(buildPreset('tiny', 0).weights.length);
    expect(deviceSwitch.host_to_device_per_switch).toBe(16 * deviceSwitch.noise_runs_per_switch);
  }, 30_000);
});
