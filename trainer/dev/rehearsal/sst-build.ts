/**
 * A function of the stack built as `sst deploy` builds it: the directory whose contents SST zips and uploads.
 * Each step follows the installed sst (3.18.10): esbuild's options from its `pkg/runtime/node/build.go`, the
 * zip's contents from `platform/src/components/aws/function.ts` (the bundle directory, then `copyFiles`).
 * SST's Go binary compiles esbuild in, so the build uses that exact esbuild (the `esbuild-sst` alias), checked
 * against the binary's Go module table. The output lies outside the repository (under os.tmpdir()), so nothing
 * in the repository's node_modules is on the bundle's resolution path, as on Lambda. One file past 300 lines
 * because it follows one build of SST's in its order, each step reading the one before's output; a split would
 * cut that sequence, not separate two concepts.
 */
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, cpSync, existsSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { deflateRawSync } from 'node:zlib';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { promisify } from 'node:util';
import type { StackFunction } from './sst-stack.ts';

const run = promisify(execFile);

/** The sst release whose build this file reproduces; another one must be read again before it is trusted. */
export const SST_VERSION = '3.18.10';

/** build.go `targetMap`: the esbuild target of each Lambda Node runtime. */
const TARGETS: Record<string, string> = {
  'nodejs22.x': 'es2023',
  'nodejs20.x': 'es2023',
  'nodejs18.x': 'es2022',
  'nodejs16.x': 'es2021',
  'nodejs14.x': 'es2020',
  'nodejs12.x': 'es2019',
};

/** build.go `forceExternal`: never bundled, and installed when the bundle imports them. */
const FORCE_EXTERNAL = ['sharp', 'pg-native'];

/** build.go's ESM banner (js.ESMBanner): `require`, `__filename` and `__dirname` for ESM output, then `nodejs.banner`. */
export function sstBanner(extra = ''): string {
  return [
    `import { createRequire as topLevelCreateRequire } from 'module';`,
    `const require = topLevelCreateRequire(import.meta.url);`,
    `import { fileURLToPath as topLevelFileUrlToPath, URL as topLevelURL } from "url"`,
    `const __filename = topLevelFileUrlToPath(import.meta.url)`,
    `const __dirname = topLevelFileUrlToPath(new topLevelURL(".", import.meta.url))`,
    extra,
  ].join('\n');
}

/**
 * The npm command build.go runs in the output directory for `nodejs.install` (x64). `--prefer-offline`,
 * `--no-audit` and `--no-fund` are ours: they let npm take tarballs from its cache without asking the
 * registry and skip two reports, and change nothing that is installed.
 */
export const SST_NPM_INSTALL = ['install', '--force', '--platform=linux', '--os=linux', '--arch=x64', '--cpu=x64'];
const NPM_QUIET = ['--prefer-offline', '--no-audit', '--no-fund'];

/** The esbuild version in a Go binary's module table (`dep\tgithub.com/evanw/esbuild\tv0.21.5\t…`). */
export function goModuleVersion(binary: string, module: string): string {
  const needle = Buffer.from(`\ndep\t${module}\tv`);
  const fd = openSync(binary, 'r');
  try {
    const chunk = Buffer.alloc(8 << 20);
    let carry = Buffer.alloc(0);
    for (let position = 0; ; ) {
      const n = readSync(fd, chunk, 0, chunk.length, position);
      if (n === 0) break;
      position += n;
      const text = Buffer.concat([carry, chunk.subarray(0, n)]);
      const at = text.indexOf(needle);
      if (at >= 0) {
        const m = /^v?([0-9][^\t\n]*)/.exec(text.subarray(at + needle.length - 1, at + needle.length + 64).toString('latin1'));
        if (m) return m[1]!;
      }
      carry = text.subarray(Math.max(0, text.length - needle.length - 64));
    }
  } finally {
    closeSync(fd);
  }
  throw new Error(`${binary} names no ${module} in its Go module table`);
}

type Esbuild = typeof import('esbuild-sst');

/**
 * The esbuild that the installed sst compiles in, as an npm package: its version must be the one in the
 * sst binary's module table, and sst must be the release this file was written against.
 */
async function sstEsbuild(root: string): Promise<Esbuild> {
  const sst = JSON.parse(readFileSync(join(root, 'node_modules/sst/package.json'), 'utf8')) as { version: string };
  if (sst.version !== SST_VERSION) {
    throw new Error(`sst ${sst.version} is installed; trainer/dev/rehearsal/sst-build.ts reproduces sst ${SST_VERSION}'s build: read pkg/runtime/node/build.go and platform/src/components/aws/function.ts of ${sst.version}, update it and SST_VERSION`);
  }
  const binary = join(root, 'node_modules/sst-linux-x64/bin/sst');
  const wanted = goModuleVersion(binary, 'github.com/evanw/esbuild');
  const esbuild = (await import('esbuild-sst')) as Esbuild;
  if (esbuild.version !== wanted) {
    throw new Error(`sst ${sst.version} compiles in esbuild ${wanted} (${binary}) but esbuild-sst is ${esbuild.version}: pin "esbuild-sst": "npm:esbuild@${wanted}" in package.json`);
  }
  return esbuild;
}

/** The handler's source file: build.go's getFile tries these extensions after `<file>` of `<file>.<export>`. */
function handlerFile(root: string, handler: string): { file: string; exportName: string } {
  const dot = handler.lastIndexOf('.');
  if (dot <= 0) throw new Error(`handler ${handler}: expected <file>.<export>`);
  const base = handler.slice(0, dot);
  for (const ext of ['.ts', '.tsx', '.mts', '.cts', '.js', '.jsx', '.mjs', '.cjs']) {
    if (existsSync(join(root, base + ext))) return { file: join(root, base + ext), exportName: handler.slice(dot + 1) };
  }
  throw new Error(`Handler not found: ${handler}`);
}

/** The esbuild options of build.go for this function (ESM, no splitting, the linked source map left out of the zip later). */
export function sstEsbuildOptions(fn: StackFunction, entry: string, outfile: string) {
  const target = TARGETS[fn.runtime];
  if (!target) throw new Error(`function ${fn.name}: runtime ${fn.runtime} is not a Node runtime SST ${SST_VERSION} knows`);
  return {
    entryPoints: [entry],
    platform: 'node' as const,
    external: [...FORCE_EXTERNAL, ...fn.install, ...fn.esbuildExternal],
    keepNames: true,
    bundle: true,
    metafile: true,
    outfile,
    sourcemap: 'linked' as const,
    format: 'esm' as const,
    target,
    mainFields: ['module', 'main'],
    banner: { js: sstBanner(fn.banner) },
    // Minified only when nodejs.minify is set (a deploy, not `sst dev`).
    minify: fn.minify,
    logLevel: 'silent' as const,
  };
}

/** A package-lock entry (lockfileVersion 3). */
interface LockEntry {
  version?: string;
  resolved?: string;
  integrity?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  dev?: boolean;
  devOptional?: boolean;
  peer?: boolean;
  link?: boolean;
  [key: string]: unknown;
}

/**
 * The root lockfile cut down to these packages and what they depend on, at the same paths: a dependency is
 * found as Node finds it (the nearest node_modules up the dependent's path), so every path kept resolves to
 * the same entry it did at the root. npm installs from it the lockfile's versions and integrity hashes.
 */
export function lockfileFor(rootLock: { packages: Record<string, LockEntry> }, dependencies: Record<string, string>): { lockfileVersion: 3; requires: true; packages: Record<string, LockEntry> } {
  const packages = rootLock.packages;
  const kept: Record<string, LockEntry> = {};
  const find = (from: string, name: string): string | undefined => {
    for (let dir = from; ; ) {
      const path = `${dir ? `${dir}/` : ''}node_modules/${name}`;
      if (packages[path]) return path;
      if (!dir) return undefined;
      const i = dir.lastIndexOf('/node_modules/');
      dir = i < 0 ? '' : dir.slice(0, i);
    }
  };
  const visit = (from: string, name: string, optional: boolean) => {
    const path = find(from, name);
    if (!path) {
      if (optional) return;
      throw new Error(`package-lock.json has no ${name} (needed by ${from || 'the function'}): run npm install at the root`);
    }
    if (kept[path]) return;
    const { dev: _dev, devOptional: _devOptional, peer: _peer, ...entry } = packages[path]!;
    if (entry.link) throw new Error(`package-lock.json links ${path}; a function's installed packages must come from the registry`);
    kept[path] = entry;
    for (const dep of Object.keys(entry.dependencies ?? {})) visit(path, dep, false);
    for (const dep of Object.keys(entry.optionalDependencies ?? {})) visit(path, dep, true);
    for (const dep of Object.keys(entry.peerDependencies ?? {})) visit(path, dep, entry.peerDependenciesMeta?.[dep]?.optional ?? false);
  };
  for (const name of Object.keys(dependencies)) visit('', name, false);
  const sorted = Object.fromEntries(Object.keys(kept).sort().map((k) => [k, kept[k]!]));
  return { lockfileVersion: 3, requires: true, packages: { '': { dependencies }, ...sorted } };
}

/** What one build produced. */
export interface FunctionBuild {
  name: string;
  /** The directory SST would zip: bundle.mjs, the installed packages, the copied files. */
  dir: string;
  /** The Lambda handler setting in that directory (`bundle.<export>`). */
  handler: string;
  /** The packages installed beside the bundle (nodejs.install, plus sharp/pg-native when imported). */
  installed: string[];
  /** Bytes of every file in `dir` (Lambda's unzipped limit counts these). */
  bytes: number;
  /** True when an identical earlier build was reused. */
  cached: boolean;
  ms: number;
}

export interface BuildOptions {
  /** The repository root (sst.config.ts's directory). */
  root?: string;
  /**
   * Where to put the build: emptied first, as SST empties its artifact directory. By default a directory
   * named by the content hash of the inputs under os.tmpdir(), reused when it exists.
   */
  outDir?: string;
  /** The cache of installs and default builds; os.tmpdir()/esopt-sst-build by default. */
  cacheDir?: string;
}

const hash = (...parts: Array<string | Uint8Array>) => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p).update('\0');
  return h.digest('hex').slice(0, 24);
};

/** Every file under `dir`, relative, sorted (symbolic links as files). */
export function listFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out.push(relative(dir, p));
    }
  };
  walk(dir);
  return out.sort();
}

const treeBytes = (dir: string) => listFiles(dir).reduce((n, f) => n + lstatSync(join(dir, f)).size, 0);

/** Hash of a copyFiles source (a file or a directory's files, names and contents). */
function contentHash(path: string): string {
  if (!statSync(path).isDirectory()) return hash(readFileSync(path));
  return hash(...listFiles(path).flatMap((f) => [f, readFileSync(join(path, f))]));
}

/** Moves a finished `staging` directory to `final` unless another build put it there first. */
function publish(staging: string, final: string): void {
  mkdirSync(dirname(final), { recursive: true });
  try {
    renameSync(staging, final);
  } catch (err) {
    rmSync(staging, { recursive: true, force: true });
    if (!existsSync(final)) throw err;
  }
}

/**
 * `npm install` of these dependencies as build.go runs it, with the root lockfile's versions, cached by
 * everything that decides what it installs (the cut lockfile, the command, the Node that runs install scripts).
 */
async function installed(root: string, cacheDir: string, dependencies: Record<string, string>): Promise<string> {
  const lock = lockfileFor(JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')), dependencies);
  const manifest = `${JSON.stringify({ dependencies })}\n`;
  const key = hash(manifest, JSON.stringify(lock), SST_NPM_INSTALL.join(' '), process.version, process.arch);
  const dir = join(cacheDir, 'installs', key);
  if (existsSync(dir)) return dir;
  const staging = `${dir}.${process.pid}.${randomBytes(4).toString('hex')}`;
  mkdirSync(staging, { recursive: true });
  // build.go writes {"dependencies": …} with Go's json.Encoder (a trailing newline).
  writeFileSync(join(staging, 'package.json'), manifest);
  writeFileSync(join(staging, 'package-lock.json'), `${JSON.stringify(lock, null, 2)}\n`);
  try {
    await run('npm', [...SST_NPM_INSTALL, ...NPM_QUIET], { cwd: staging, maxBuffer: 64 << 20 });
  } catch (err) {
    rmSync(staging, { recursive: true, force: true });
    const e = err as { stderr?: string; message: string };
    throw new Error(`npm install of ${Object.keys(dependencies).join(', ')} failed: ${(e.stderr ?? e.message).slice(-4000)}`);
  }
  publish(staging, dir);
  return dir;
}

/** Builds one function of the stack (stackFunctions in sst-stack.ts) into the directory SST would zip. */
export async function buildFunction(fn: StackFunction, options: BuildOptions = {}): Promise<FunctionBuild> {
  const started = Date.now();
  const root = resolve(options.root ?? process.cwd());
  const cacheDir = options.cacheDir ?? join(tmpdir(), 'esopt-sst-build');
  const esbuild = await sstEsbuild(root);
  const { file, exportName } = handlerFile(root, fn.handler);
  const copies = fn.copyFiles.map(({ from, to }) => {
    if (isAbsolute(to)) throw new Error(`function ${fn.name}: Copy destination path "${to}" must be relative`);
    const source = join(root, from);
    if (!existsSync(source)) throw new Error(`function ${fn.name}: copyFiles source ${from} does not exist`);
    return { source, to };
  });

  // The bundle, in memory first: its bytes are part of the cache key.
  const bundleDir = join(cacheDir, 'bundling');
  const result = await esbuild.build({ ...sstEsbuildOptions(fn, file, join(bundleDir, 'bundle.mjs')), absWorkingDir: root, write: false });
  if (result.errors.length) throw new Error(`esbuild failed for ${fn.name}: ${result.errors.map((e) => e.text).join('; ')}`);
  const bundle = result.outputFiles.find((f) => f.path.endsWith(`${sep}bundle.mjs`));
  if (!bundle) throw new Error(`esbuild wrote no bundle.mjs for ${fn.name}`);
  // sharp and pg-native are installed when the bundle imports them and nodejs.esbuild.external does not name them.
  const imported = new Set(Object.values(result.metafile!.inputs).flatMap((i) => i.imports.filter((m) => m.external).map((m) => m.path)));
  const install = [...fn.install, ...FORCE_EXTERNAL.filter((p) => imported.has(p) && !fn.esbuildExternal.includes(p) && !fn.install.includes(p))];
  const rootManifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
  // build.go: the version in the nearest package.json's dependencies, else "*".
  const dependencies = Object.fromEntries(install.map((p) => [p, rootManifest.dependencies?.[p] ?? '*']));

  const key = hash(fn.name, bundle.contents, JSON.stringify(dependencies), readFileSync(join(root, 'package-lock.json')), process.version, ...copies.flatMap((c) => [c.to, contentHash(c.source)]));
  const final = options.outDir ? resolve(options.outDir) : join(cacheDir, 'functions', `${fn.name}-${key}`);
  const within = relative(root, final);
  if (!within.startsWith('..') && !isAbsolute(within)) throw new Error(`the build of ${fn.name} must lie outside the repository (${final}): the repository's node_modules would be on its resolution path`);
  const done = (cached: boolean): FunctionBuild => ({ name: fn.name, dir: final, handler: `bundle.${exportName}`, installed: install, bytes: treeBytes(final), cached, ms: Date.now() - started });
  if (!options.outDir && existsSync(final)) return done(true);

  const staging = options.outDir ? final : `${final}.${process.pid}.${randomBytes(4).toString('hex')}`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  // The source map stays out: SST uploads it apart from the zip.
  writeFileSync(join(staging, 'bundle.mjs'), bundle.contents);
  if (install.length) cpSync(await installed(root, cacheDir, dependencies), staging, { recursive: true, verbatimSymlinks: true });
  // function.ts adds copyFiles to the zip after the bundle directory, at their `to` paths.
  for (const { source, to } of copies) cpSync(source, join(staging, to), { recursive: true });
  if (!options.outDir) publish(staging, final);
  return done(false);
}

/**
 * The size of the zip SST would upload for `dir`: each file deflated at zlib's default level (archiver's), plus
 * the zip format's per-file headers (local header, data descriptor, central directory entry) and its end record.
 */
export function zipBytes(dir: string): number {
  let bytes = 22;
  for (const f of listFiles(dir)) {
    const name = Buffer.byteLength(f);
    bytes += 30 + name + deflateRawSync(readFileSync(join(dir, f))).length + 16 + 46 + name;
  }
  return bytes;
}
