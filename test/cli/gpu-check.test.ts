import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const script = join(import.meta.dirname, '../../scripts/gpu-check.sh');
const dir = mkdtempSync(join(tmpdir(), 'esopt-gpu-check-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const run = (env: Record<string, string>) => spawnSync('bash', [script, '--out', join(dir, 'out.json')], { env: { ...process.env, ...env }, encoding: 'utf8' });

describe('scripts/gpu-check.sh', () => {
  it('refuses clearly on a machine without an NVIDIA driver, running nothing', () => {
    const r = run({ NVIDIA_SMI: join(dir, 'no-such-nvidia-smi') });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/FAIL: nvidia-smi not found: no NVIDIA driver/);
    expect(existsSync(join(dir, 'out.json'))).toBe(false);
  });

  it.skipIf(existsSync(join(import.meta.dirname, '../../node_modules/onnxruntime-node/bin/napi-v6/linux/x64/libonnxruntime_providers_cuda.so')))(
    'with a driver but without onnxruntime\'s CUDA binaries, says how to install them',
    () => {
      const smi = join(dir, 'nvidia-smi');
      writeFileSync(smi, '#!/bin/sh\necho "Test GPU, 550.00, 1024 MiB"\n');
      chmodSync(smi, 0o755);
      const r = run({ NVIDIA_SMI: smi });
      expect(r.status).toBe(1);
      expect(r.stderr).toMatch(/Test GPU/);
      expect(r.stderr).toMatch(/no CUDA EP binaries .*ONNXRUNTIME_NODE_INSTALL=cuda12/);
    },
  );
});
