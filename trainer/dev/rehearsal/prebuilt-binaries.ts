/**
 * isolated-vm's prebuilt binary, where its installer looks before it downloads one. A deploy's npm install
 * (beside a function's bundle, or on a box) runs `prebuild-install`, which fetches the binary for this Node
 * ABI from GitHub and otherwise compiles V8 bindings for a minute or more. GitHub is out of reach here, so
 * the rehearsal puts the binary this checkout's own install built for the same package version, Node ABI,
 * platform and architecture into prebuild-install's cache under the URL it would download: the install then
 * proceeds as a deploy with the internet does. Listed among the rehearsal's replaced steps.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

export interface SeededPrebuild {
  package: string;
  url: string;
  file: string;
  /** False when the cache already held it. */
  written: boolean;
}

interface PrebuildUtil {
  getDownloadUrl(opts: Record<string, unknown>): string;
  cachedPrebuild(url: string): string;
}

/** Seeds the cache for isolated-vm from `root`'s node_modules; null when that install has no built binary. */
export function seedIsolatedVmPrebuild(root: string): SeededPrebuild | null {
  const require = createRequire(join(root, 'package.json'));
  const packageDir = dirname(require.resolve('isolated-vm/package.json'));
  const binary = join(packageDir, 'out', 'isolated_vm.node');
  if (!existsSync(binary)) return null;
  const pkg = require('isolated-vm/package.json') as { name: string; version: string };
  // prebuild-install's own URL and cache path, from the copy isolated-vm depends on.
  const util = createRequire(join(packageDir, 'package.json'))('prebuild-install/util') as PrebuildUtil;
  const url = util.getDownloadUrl({ pkg, runtime: 'node', abi: process.versions.modules, platform: process.platform, arch: process.arch, libc: '', 'tag-prefix': 'v' });
  const file = util.cachedPrebuild(url);
  if (existsSync(file)) return { package: `${pkg.name}@${pkg.version}`, url, file, written: false };
  mkdirSync(dirname(file), { recursive: true });
  const staging = `${file}.${process.pid}.tmp`;
  // The layout the package loads from (binary.module_path "out"), as its released prebuilds carry it.
  execFileSync('tar', ['-czf', staging, '-C', packageDir, 'out/isolated_vm.node']);
  renameSync(staging, file);
  return { package: `${pkg.name}@${pkg.version}`, url, file, written: true };
}
