/**
 * The rehearsal's runtime interface client, installed on first use (trainer/dev/rehearsal/runtime-client.ts),
 * with an injected PATH, cache directory and installer, so no network and no compiler: missing build tools
 * are named before npm runs; a complete cache is used as it is; a killed install's temporary directory and
 * stale lock are cleaned up; concurrent callers build once; a wrong package is refused.
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  defaultRuntimeClientCache,
  ensureRuntimeClient,
  missingBuildTools,
  RIC_APT_COMMAND,
  RIC_BUILD_TOOLS,
  RIC_INTEGRITY,
  RIC_VERSION,
  type Installer,
} from '../../trainer/dev/rehearsal/runtime-client.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function scratch(): string {
  const d = mkdtempSync(join(tmpdir(), 'esopt-ric-cache-'));
  dirs.push(d);
  return d;
}

/** A directory of executables with these names: the PATH the tools are looked up on. */
function bin(names: string[]): string {
  const d = join(scratch(), 'bin');
  mkdirSync(d);
  for (const n of names) {
    writeFileSync(join(d, n), '#!/bin/sh\n');
    chmodSync(join(d, n), 0o755);
  }
  return d;
}
const allTools = () => bin(RIC_BUILD_TOOLS.map((t) => t.commands[0]!));

/** What a finished npm install leaves in a prefix. */
function writeInstall(prefix: string, o: { version?: string; integrity?: string; built?: boolean } = {}): void {
  const dir = join(prefix, 'node_modules', 'aws-lambda-ric');
  mkdirSync(join(dir, 'bin'), { recursive: true });
  mkdirSync(join(dir, 'dist'), { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'aws-lambda-ric', version: o.version ?? RIC_VERSION }));
  writeFileSync(join(dir, 'bin', 'index.mjs'), '');
  if (o.built !== false) writeFileSync(join(dir, 'dist', 'rapid-client.node'), '');
  writeFileSync(join(prefix, 'node_modules', '.package-lock.json'), JSON.stringify({ packages: { 'node_modules/aws-lambda-ric': { version: RIC_VERSION, integrity: o.integrity ?? RIC_INTEGRITY } } }));
}

function fakeInstaller(o: { delayMs?: number; fail?: boolean; version?: string } = {}) {
  const prefixes: string[] = [];
  const install: Installer = async (prefix) => {
    prefixes.push(prefix);
    writeFileSync(join(prefix, 'half'), 'x');
    if (o.delayMs) await new Promise((r) => setTimeout(r, o.delayMs));
    if (o.fail) throw new Error('npm install aws-lambda-ric@3.3.0 failed (exit 1)');
    writeInstall(prefix, { version: o.version });
  };
  return { install, prefixes };
}

describe('the runtime client installed on first use', () => {
  it('names the missing build tools and the Debian command, without running npm', async () => {
    const root = scratch();
    const cacheDir = join(root, 'cache', 'aws-lambda-ric-3.3.0');
    const { install, prefixes } = fakeInstaller();
    const path = bin(['make', 'cmake', 'python3']);
    expect(missingBuildTools(path).map((m) => m.package)).toEqual(['autoconf', 'automake', 'libtool', 'g++']);
    const err = await ensureRuntimeClient({ cacheDir, path, install, log: () => {} }).catch((e: Error) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toContain('not on PATH: autoconf, automake, libtoolize (libtool), g++.');
    expect((err as Error).message).toContain('sudo apt-get install autoconf automake libtool cmake make g++ python3');
    expect(RIC_APT_COMMAND).toBe('apt-get install autoconf automake libtool cmake make g++ python3');
    expect(prefixes).toEqual([]);
    expect(existsSync(join(root, 'cache'))).toBe(false);
  });

  it('uses a complete cache as it is: no tools needed, nothing installed', async () => {
    const cacheDir = join(scratch(), 'ric');
    writeInstall(cacheDir);
    const { install, prefixes } = fakeInstaller();
    const dir = await ensureRuntimeClient({ cacheDir, path: '', install, log: () => {} });
    expect(dir).toBe(join(cacheDir, 'node_modules', 'aws-lambda-ric'));
    expect(prefixes).toEqual([]);
  });

  it('installs into a temporary directory and renames it into place, removing a killed install\'s leftovers and its stale lock', async () => {
    const root = scratch();
    const cacheDir = join(root, 'ric');
    // A killed install: its half-written temporary directory (a pid no process has) and its lock.
    const dead = 2 ** 22 + 7;
    mkdirSync(join(root, `ric.tmp-${dead}-0badcafe`, 'node_modules', 'aws-lambda-ric'), { recursive: true });
    writeFileSync(join(root, 'ric.lock'), String(dead));
    const lines: string[] = [];
    const { install, prefixes } = fakeInstaller();
    const dir = await ensureRuntimeClient({ cacheDir, path: allTools(), install, log: (l) => lines.push(l) });
    expect(dir).toBe(join(cacheDir, 'node_modules', 'aws-lambda-ric'));
    expect(prefixes).toHaveLength(1);
    expect(prefixes[0]).toMatch(new RegExp(`ric\\.tmp-${process.pid}-[0-9a-f]{8}$`));
    expect(readdirSync(root).sort()).toEqual(['ric']);
    expect(existsSync(join(cacheDir, 'half'))).toBe(true);
    expect(lines[0]).toMatch(/^installing aws-lambda-ric 3\.3\.0 .* into .*ric …$/);
    expect(lines.at(-1)).toMatch(/^aws-lambda-ric 3\.3\.0 installed in \d+ s$/);
  });

  it('replaces an incomplete cache (no built client) with a fresh install', async () => {
    const cacheDir = join(scratch(), 'ric');
    writeInstall(cacheDir, { built: false });
    const { install, prefixes } = fakeInstaller();
    await ensureRuntimeClient({ cacheDir, path: allTools(), install, log: () => {} });
    expect(prefixes).toHaveLength(1);
    expect(existsSync(join(cacheDir, 'node_modules', 'aws-lambda-ric', 'dist', 'rapid-client.node'))).toBe(true);
  });

  it('builds once for concurrent callers: the others wait on the lock', async () => {
    const root = scratch();
    const cacheDir = join(root, 'ric');
    const { install, prefixes } = fakeInstaller({ delayMs: 300 });
    const lines: string[] = [];
    const path = allTools();
    const all = await Promise.all([0, 1, 2].map(() => ensureRuntimeClient({ cacheDir, path, install, log: (l) => lines.push(l), pollMs: 20 })));
    expect(new Set(all)).toEqual(new Set([join(cacheDir, 'node_modules', 'aws-lambda-ric')]));
    expect(prefixes).toHaveLength(1);
    expect(lines.filter((l) => l.startsWith(`waiting for process ${process.pid}`))).toHaveLength(2);
    expect(readdirSync(root).sort()).toEqual(['ric']);
  });

  it('leaves no cache, temporary directory or lock when the install fails, and says why', async () => {
    const root = scratch();
    const cacheDir = join(root, 'ric');
    const { install } = fakeInstaller({ fail: true });
    await expect(ensureRuntimeClient({ cacheDir, path: allTools(), install, log: () => {} })).rejects.toThrow('npm install aws-lambda-ric@3.3.0 failed (exit 1)');
    expect(readdirSync(root).sort()).toEqual([]);
  });

  it('refuses an install of another version than the pinned one', async () => {
    const root = scratch();
    const cacheDir = join(root, 'ric');
    const { install } = fakeInstaller({ version: '3.2.1' });
    await expect(ensureRuntimeClient({ cacheDir, path: allTools(), install, log: () => {} })).rejects.toThrow(/not version 3\.3\.0 with integrity sha512-/);
    expect(readdirSync(root).sort()).toEqual([]);
  });

  it('keeps its cache in ESOPT_LAMBDA_RIC_DIR, else under ~/.cache/esopt', () => {
    expect(defaultRuntimeClientCache({ ESOPT_LAMBDA_RIC_DIR: '/opt/ric' })).toBe('/opt/ric');
    expect(defaultRuntimeClientCache({})).toMatch(/\/\.cache\/esopt\/aws-lambda-ric-3\.3\.0$/);
  });
});
