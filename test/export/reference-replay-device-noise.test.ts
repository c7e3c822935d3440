/**
 * The reference replay in C (scripts/reference-replay/replay.c) under the device noise definition
 * (docs/REPLAY.md §11): its ε equals `deviceNoiseAt` through `applyDeviceNoise` bit for bit, across a key
 * block boundary and with every key field at its maximum, and a hand-built full-mode artifact whose
 * `noise` is esopt-device-noise 1 replays from θ_0 to the θ_K that `applyDeviceNoise` gives, hash by hash.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyDeviceNoise, BLOCK, DEVICE_NOISE_DEFINITION } from '../../shared/device-noise.ts';
import { hashTheta } from '../../shared/theta-hash.ts';
import { float64Bits } from '../../trainer/training/export/run-artifact-text.ts';

const SOURCE = fileURLToPath(new URL('../../scripts/reference-replay/replay.c', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'esopt-replay-device-'));
const bin = join(root, 'replay');
afterAll(() => rmSync(root, { recursive: true, force: true }));

beforeAll(() => {
  const cc = spawnSync('cc', ['-O2', '-std=c99', '-ffp-contract=off', '-o', bin, SOURCE, '-lm'], { encoding: 'utf8' });
  if (cc.error) throw new Error(`this test compiles scripts/reference-replay/replay.c and needs a C compiler as \`cc\` on PATH (gcc or clang): ${cc.error.message}`);
  if (cc.status !== 0) throw new Error(`cc failed on replay.c:\n${cc.stderr}`);
});

function replay(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(bin, args, { encoding: 'utf8', maxBuffer: 1 << 26 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const hex32 = (f: Float32Array) => Array.from(new Uint32Array(f.buffer, f.byteOffset, f.length), (b) => b.toString(16).padStart(8, '0'));

describe('the device noise definition in C', () => {
  it('equals deviceNoiseAt bit for bit, across a key block boundary and at every key field’s maximum', () => {
    const streams = [
      [11, 3, 5, 0, 3000],
      [7, 0, 1, BLOCK - 1500, 3000], // block 0 → 1
      [0xffffffff, 0xffffffff, 0xffffffff, 5 * BLOCK + 123_456_789, 2000],
    ] as const;
    for (const [runSeed, iteration, member, offset, count] of streams) {
      const r = replay(['device-noise', String(runSeed), String(iteration), String(member), String(offset), String(count)]);
      expect(r.status, r.stderr).toBe(0);
      const want = new Float32Array(count);
      applyDeviceNoise(want, { runSeed, iteration, member }, 1, offset, 0, count);
      expect(r.stdout.trim().split('\n'), `key ${[runSeed, iteration, member, offset]}`).toEqual(hex32(want));
    }
  });

  it('replays a full-mode run whose noise is esopt-device-noise 1 to applyDeviceNoise’s θ_K, hash by hash', () => {
    // three tensors, the middle one not updated; three updates, one with weight decay, noise indices up to 2^32 − 1
    const tensors = [
      { offset: 0, count: 1500, updated: true },
      { offset: 1500, count: 37, updated: false },
      { offset: 1537, count: 4100, updated: true },
    ];
    const params = 5637;
    const updates = [
      { runSeed: 9, decay: 0, coefs: [[0, 0.0123], [1, -0.0071], [4, 0.00031]] },
      { runSeed: 9, decay: 0.0005 * 0.01, coefs: [[2, -0.02], [3, 0.015]] },
      { runSeed: 9, decay: 0, coefs: [[0, 0.004], [0xffffffff, -0.0009]] },
    ] as const;
    const theta0 = Float32Array.from({ length: params }, (_, i) => Math.fround(Math.cos(i * 0.013) * 0.08));
    const theta = theta0.slice();
    const hashes: string[] = [];
    updates.forEach((u, iteration) => {
      const keep = 1 - u.decay;
      for (const t of tensors.filter((t) => t.updated)) {
        const acc = new Float64Array(t.count);
        for (const [member, coef] of u.coefs) applyDeviceNoise(acc, { runSeed: u.runSeed, iteration, member }, coef, t.offset, 0, t.count);
        for (let j = 0; j < t.count; j++) theta[t.offset + j] = Math.fround(theta[t.offset + j] * keep + acc[j]);
      }
      hashes.push(hashTheta([{ data: theta }]));
    });
    expect(hashes[2]).not.toBe(hashTheta([{ data: theta0 }]));

    const text = [
      'esopt-run/2',
      `noise ${DEVICE_NOISE_DEFINITION.id} ${DEVICE_NOISE_DEFINITION.version}`,
      'mode full 0',
      `theta0 ${hashTheta([{ data: theta0 }])}`,
      `tensors ${tensors.length} ${params}`,
      ...tensors.map((t, i) => `tensor ${t.offset} ${t.count} ${t.updated ? 1 : 0} t${i}`),
      'targets 0',
      `updates ${updates.length}`,
      ...updates.flatMap((u, k) => [`update ${k} ${u.runSeed} ${float64Bits(u.decay)} ${u.coefs.length} ${hashes[k]}`, ...u.coefs.map(([m, c]) => `coef ${m} ${float64Bits(c)}`)]),
    ].join('\n');
    const runTxt = join(root, 'run.txt');
    const theta0Bin = join(root, 'theta0.bin');
    const out = join(root, 'thetaK.bin');
    writeFileSync(runTxt, `${text}\n`);
    writeFileSync(theta0Bin, new Uint8Array(theta0.buffer));
    const r = replay(['run', runTxt, theta0Bin, out]);
    expect(r.stderr).toBe('');
    expect(r.stdout.trim().split('\n').slice(1, 4)).toEqual(hashes.map((h, k) => `iteration ${k} ${h} ok`));
    expect(r.status).toBe(0);
    const got = new Float32Array(new Uint8Array(readFileSync(out)).buffer);
    expect(hex32(got)).toEqual(hex32(theta));

    // the same artifact read as the Gaussian stream's run misses its first hash: the definition line is obeyed
    writeFileSync(runTxt, `${text.replace(`noise ${DEVICE_NOISE_DEFINITION.id}`, 'noise esopt-noise')}\n`);
    expect(replay(['run', runTxt, theta0Bin, out]).status).toBe(3);
    writeFileSync(runTxt, `${text.replace(`noise ${DEVICE_NOISE_DEFINITION.id} 1`, `noise ${DEVICE_NOISE_DEFINITION.id} 2`)}\n`);
    const refused = replay(['run', runTxt, theta0Bin, out]);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(/version 1 of esopt-device-noise only/);
  });
});
