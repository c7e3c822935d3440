/**
 * The run artifact (trainer/training/export/run-artifact.ts) replayed by the reference replay in C
 * (scripts/reference-replay/replay.c, written from docs/REPLAY.md): the C program's noise equals
 * `fillNoise` bit for bit (across chunk boundaries, through the ziggurat's slow paths), its exp, log and
 * θ hash equal Math.exp, Math.log and `hashTheta`, and tiny real runs (full mode on the tiny preset,
 * low-rank mode on a tied-embedding export, so a transposed target too) replayed from θ_0 give the
 * TypeScript restore's θ_K bit for bit and every logged θ hash on the way.
 */
import { resolveModelSpec } from '../../trainer/training/model-store/resolve-model.ts';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../shared/keys.ts';
import { fillNoise } from '../../shared/noise.ts';
import { RunArtifact, RunConfig, type RunConfigInput } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { hashTheta } from '../../shared/theta-hash.ts';
import { buildRunArtifact, writeRunArtifact, type WrittenRunArtifact } from '../../trainer/training/export/run-artifact.ts';
import { float64Bits } from '../../trainer/training/export/run-artifact-text.ts';
import { readLog } from '../../trainer/training/loop/checkpoints.ts';
import { runEmbedded } from '../../trainer/assembly/run.ts';
import { silentProgress } from '../../trainer/training/loop/progress.ts';
import { restoreFromLog } from '../../trainer/training/loop/restore.ts';
import { createEngine } from '../../trainer/engine/model/create-engine.ts';

const SOURCE = fileURLToPath(new URL('../../scripts/reference-replay/replay.c', import.meta.url));
const TIED_MODEL = fileURLToPath(new URL('../fixtures/torch-llama-tied', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'esopt-replay-'));
const bin = join(root, 'replay');
afterAll(() => rmSync(root, { recursive: true, force: true }));

beforeAll(() => {
  const cc = spawnSync('cc', ['-O2', '-std=c99', '-ffp-contract=off', '-o', bin, SOURCE, '-lm'], { encoding: 'utf8' });
  if (cc.error) throw new Error(`the reference replay test compiles scripts/reference-replay/replay.c and needs a C compiler as \`cc\` on PATH (gcc or clang): ${cc.error.message}`);
  if (cc.status !== 0) throw new Error(`cc failed on replay.c:\n${cc.stderr}`);
});

function replay(args: string[], input?: string | Buffer): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(bin, args, { input, encoding: 'utf8', maxBuffer: 1 << 28 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const hex32 = (f: Float32Array) => Array.from(new Uint32Array(f.buffer, f.byteOffset, f.length), (b) => b.toString(16).padStart(8, '0'));

describe('the noise stream in C', () => {
  // (runSeed, iteration, member, offset, count): from 0, across chunk 0→1 (CHUNK = 4096), deep into a
  // stream with the chunk counter's high word set (offset ≥ 2^32), and with every key field at its maximum
  const streams = [
    [11, 0, 0, 0, 6000],
    [7, 3, 2, 4090, 200],
    [1, 1, 1, 2 ** 32 + 4000, 300],
    [0xffffffff, 1_000_000_000, 0xffffffff, 123_456_789, 5000],
  ] as const;

  it('equals fillNoise bit for bit, across chunk boundaries and through the wedge and tail', () => {
    const paths = new Map<string, number>();
    for (const [runSeed, iteration, member, offset, count] of streams) {
      const lines = replay(['noise', String(runSeed), String(iteration), String(member), String(offset), String(count)]).stdout.trim().split('\n');
      const expected = new Float32Array(count);
      fillNoise(expected, { runSeed, iteration, member }, offset);
      expect(lines.map((l) => l.split(' ')[0]), `key ${[runSeed, iteration, member, offset]}`).toEqual(hex32(expected));
      for (const l of lines) paths.set(l.split(' ')[1], (paths.get(l.split(' ')[1]) ?? 0) + 1);
    }
    // the compared values went through every path of the ziggurat, slow ones included
    expect(paths.get('f')).toBeGreaterThan(10_000);
    expect(paths.get('w')).toBeGreaterThan(50);
    expect(paths.get('t')).toBeGreaterThan(2);
  });

  it('computes exp and log as Math.exp and Math.log do (fdlibm), on the ziggurat arguments and at random', () => {
    const rand = (seed: number) => () => ((seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32);
    const r = rand(42);
    // with V8's special case exp(1) = e, the reduction's branch points, and log's subnormal and exact cases
    const expArgs = [1, 0, -0, 0.5 * Math.LN2, 1.5 * Math.LN2, 2 ** -29, -745.2, 709.8, ...Array.from({ length: 20_000 }, (_, i) => (i % 2 ? -0.5 * (r() * 3.45) ** 2 : (r() - 0.5) * 1400))];
    // the tail's uniforms (u + 1/2)·2^-32, and the table's arguments near 1
    const logArgs = [1, 2, 0.5, 2 ** -1074, 1 + 2 ** -30, ...Array.from({ length: 20_000 }, (_, i) => (i % 2 ? (Math.floor(r() * 2 ** 32) + 0.5) * 2 ** -32 : 0.9 + r() * 0.2))];
    for (const [fn, args] of [['exp', expArgs], ['log', logArgs]] as const) {
      const out = replay(['math', fn], `${args.map(float64Bits).join('\n')}\n`).stdout.trim().split('\n');
      expect(out, fn).toEqual(args.map((x) => float64Bits(Math[fn](x))));
    }
  });

  it('hashes bytes as hashTheta does', () => {
    for (const n of [0, 13, 14, 16, 1000]) {
      const data = new Float32Array(n).map((_, i) => Math.sin(i) * 1e3);
      expect(replay(['sha256'], Buffer.from(data.buffer)).stdout.trim()).toBe(hashTheta([{ data }]));
    }
  });
});

const baseConfig: RunConfigInput = {
  environment: { name: 'sudoku', options: { size: 4, blanks: 4, shapedReward: true, invalidMove: 'waste' } },
  tasks: { seed: 3, trainPerIteration: 2, evalCount: 1 },
  model: { preset: 'tiny', seed: 1 },
  // the seeded random scripted policy: rewards differ between members, so every update moves θ
  es: { population: 6, sigma: 0.05, alpha: 0.05, weightDecay: 0.01 },
  iterations: 3,
  evalInterval: 100,
  checkpointInterval: 100,
  policy: 'scripted:random',
  localEpisodes: 'in-process',
  workers: 2,
  deadlineMs: 60_000,
  seed: 11,
};

interface Replayed {
  written: WrittenRunArtifact;
  thetaK: Buffer;
  stdout: string;
  status: number | null;
}

/** Trains `run`, writes its artifact, replays it in C from θ_0. */
async function trainAndReplay(run: string, overrides: Partial<RunConfigInput>): Promise<{ store: FsObjectStore; storeRoot: string; config: RunConfig } & Replayed> {
  const storeRoot = join(root, run);
  const config = RunConfig.parse({ ...baseConfig, ...overrides });
  await runEmbedded({ config, run, storeRoot, progress: silentProgress });
  const store = new FsObjectStore(storeRoot);
  const written = await writeRunArtifact(store, run, join(root, `${run}-artifact`));
  const out = join(root, `${run}-thetaK.bin`);
  const r = replay(['run', written.text, written.theta0, out]);
  expect(r.stderr).toBe('');
  return { store, storeRoot, config, written, thetaK: readFileSync(out), stdout: r.stdout, status: r.status };
}

/** θ_K as the trainer's restore rebuilds it from θ_0 and the log alone (the final checkpoint removed). */
async function typescriptRestore(store: FsObjectStore, storeRoot: string, run: string, config: RunConfig): Promise<Buffer> {
  rmSync(join(storeRoot, keys.checkpoints(run)), { recursive: true, force: true });
  const engine = await createEngine({ model: await resolveModelSpec(config.model, undefined), mode: config.mode });
  try {
    const restored = await restoreFromLog(store, run, engine, config.rank);
    expect(restored.replayed).toBe(config.iterations);
    return Buffer.concat(engine.segments().map((s) => Buffer.from(s.data.buffer, s.data.byteOffset, s.data.byteLength)));
  } finally {
    await engine.close();
  }
}

describe.each([
  { name: 'full', mode: 'full' as const, overrides: {} },
  { name: 'lowrank', mode: 'lowrank' as const, overrides: { mode: 'lowrank' as const, rank: 3, model: { dir: TIED_MODEL } } },
  // targeted runs: the updated flags skip tensors whose stream places stay where they are
  { name: 'full-targeted', mode: 'full' as const, overrides: { targets: { include: ['q_proj', 'down_proj'], exclude: ['layers\\.0\\.'] } } },
  { name: 'lowrank-targeted', mode: 'lowrank' as const, overrides: { mode: 'lowrank' as const, rank: 3, model: { dir: TIED_MODEL }, targets: { include: 'all-linear' as const, exclude: ['self_attn'] } } },
  // the device noise definition (docs/REPLAY.md §11) in place of the Gaussian stream
  { name: 'full-device-noise', mode: 'full' as const, overrides: { noise: 'esopt-device-noise' as const } },
])('a $name run replayed in C', ({ name, mode, overrides }) => {
  const run = `replay-${name}`;
  let trained: Awaited<ReturnType<typeof trainAndReplay>>;
  beforeAll(async () => {
    trained = await trainAndReplay(run, overrides);
  }, 60_000);

  it('has an artifact with θ_0, the layout and nonzero updates of every iteration', async () => {
    const { artifact } = trained.written;
    expect(RunArtifact.parse(JSON.parse(readFileSync(trained.written.json, 'utf8')))).toEqual(artifact);
    expect(artifact.mode).toBe(mode);
    expect(artifact.updates).toHaveLength(3);
    for (const u of artifact.updates) {
      expect(u.coefficients.length).toBeGreaterThan(0);
      expect(u.decay).toBe(0.05 * 0.01);
    }
    const log = await readLog(trained.store, run);
    expect(artifact.updates.map((u) => u.thetaHashAfter)).toEqual(log.map((e) => e.thetaHashAfter));
    if (name === 'lowrank') expect(artifact.lowRankTargets?.some((t) => t.transposed)).toBe(true);
    // updated: what the run's targets select among the tensors the mode perturbs
    const updated = artifact.layout.tensors.filter((t) => t.updated).map((t) => t.name);
    if (name === 'full' || name === 'full-device-noise') expect(updated).toHaveLength(artifact.layout.tensors.length);
    expect(artifact.noise).toEqual(name === 'full-device-noise' ? { id: 'esopt-device-noise', version: 1 } : { id: 'esopt-noise', version: 1 });
    if (name === 'lowrank') expect(updated).toEqual(artifact.lowRankTargets!.map((t) => artifact.layout.tensors[t.tensor].name));
    if (name === 'full-targeted') expect(updated).toEqual(['model.layers.1.self_attn.q_proj.weight', 'model.layers.1.mlp.down_proj.weight']);
    if (name === 'lowrank-targeted') {
      // the export names its weights after the MatMuls (onnx::MatMul_…): some matrices, not all
      expect(updated.length).toBeGreaterThan(0);
      expect(updated.length).toBeLessThan(artifact.lowRankTargets!.length);
    }
    expect(readFileSync(trained.written.theta0).byteLength).toBe(artifact.layout.params * 4);
  });

  it('reaches the TypeScript restore θ_K bit for bit, and every logged θ hash', async () => {
    const { artifact } = trained.written;
    expect(trained.status, trained.stdout).toBe(0);
    const lines = trained.stdout.trim().split('\n');
    expect(lines[0]).toBe(`theta0 ${artifact.theta0Hash}`);
    expect(lines.slice(1, -1)).toEqual(artifact.updates.map((u) => `iteration ${u.iteration} ${u.thetaHashAfter} ok`));
    const restored = await typescriptRestore(trained.store, trained.storeRoot, run, trained.config);
    expect(trained.thetaK.equals(restored)).toBe(true);
    expect(trained.thetaK.equals(readFileSync(trained.written.theta0))).toBe(false);
    expect(lines.at(-1)).toBe(`thetaK ${artifact.updates.at(-1)!.thetaHashAfter}`);
  });

  it('misses the logged hash when one coefficient is off by 2^-12 of itself, and refuses another θ_0', () => {
    const text = readFileSync(trained.written.text, 'utf8');
    const first = text.match(/^coef (\d+) ([0-9a-f]{16})$/m)!;
    const nudged = (BigInt(`0x${first[2]}`) ^ (1n << 40n)).toString(16).padStart(16, '0');
    const tampered = join(root, `${run}-tampered.txt`);
    writeFileSync(tampered, text.replace(first[0], `coef ${first[1]} ${nudged}`));
    const r = replay(['run', tampered, trained.written.theta0, join(root, `${run}-tampered.bin`)]);
    expect(r.status).toBe(3);
    expect(r.stdout).toContain('iteration 0 ');
    expect(r.stdout.split('\n').find((l) => l.startsWith('iteration 0 '))).toMatch(/MISMATCH$/);

    const otherTheta0 = join(root, `${run}-other-theta0.bin`);
    const bytes = readFileSync(trained.written.theta0);
    bytes[0] ^= 1;
    writeFileSync(otherTheta0, bytes);
    const refused = replay(['run', trained.written.text, otherTheta0, join(root, `${run}-other.bin`)]);
    expect(refused.status).toBe(2);
    expect(refused.stderr).toContain(`the run's θ_0 is ${trained.written.artifact.theta0Hash}`);
  });
});

describe('the run artifact refuses what it cannot replay', () => {
  it('names the field of a malformed artifact', async () => {
    const store = new FsObjectStore(join(root, 'replay-full'));
    const { artifact } = await buildRunArtifact(store, 'replay-full');
    const swapped = structuredClone(artifact);
    swapped.updates[0].coefficients.reverse();
    expect(RunArtifact.safeParse(swapped).error?.issues[0].path).toEqual(['updates', 0, 'coefficients', 1, 'noiseIndex']);
    const lowRankWithoutTargets = { ...structuredClone(artifact), mode: 'lowrank' };
    expect(RunArtifact.safeParse(lowRankWithoutTargets).error?.issues[0]).toMatchObject({ path: ['lowRankTargets'], message: 'is required in low-rank mode' });
    const shifted = structuredClone(artifact);
    shifted.layout.tensors[1].offset += 1;
    expect(RunArtifact.safeParse(shifted).error?.issues[0].path).toEqual(['layout', 'tensors', 1, 'offset']);
  });

  it('refuses a run whose model is not its θ_0, and a run that is not there', async () => {
    const storeRoot = join(root, 'replay-full');
    const store = new FsObjectStore(storeRoot);
    const configKey = join(storeRoot, keys.config('replay-full'));
    const original = readFileSync(configKey, 'utf8');
    try {
      writeFileSync(configKey, JSON.stringify({ ...JSON.parse(original), model: { preset: 'tiny', seed: 2 } }));
      await expect(buildRunArtifact(store, 'replay-full')).rejects.toThrow(/the model's θ_0 \([0-9a-f]{32}\) is not the run's θ_0/);
    } finally {
      writeFileSync(configKey, original);
    }
    await expect(buildRunArtifact(store, 'no-such-run')).rejects.toThrow('run no-such-run: no runs/no-such-run/config.json in the store');
  });
});
