/**
 * AWS's runtime interface client (aws-lambda-ric), which the rehearsal runs each function under
 * (execution-environment.ts), installed on first use into a cache outside the checkout, so that `npm ci`
 * needs nothing but Node: its install compiles curl and aws-lambda-cpp (autoconf, automake, libtool, cmake,
 * make, g++ and, for node-gyp, python3) for about a minute and a half on two cores.
 *
 * The cache is `ESOPT_LAMBDA_RIC_DIR`, else `~/.cache/esopt/aws-lambda-ric-3.3.0/`: an npm prefix holding
 * `node_modules/aws-lambda-ric`. The first caller installs the exact version with
 * `npm install --prefix <temp> --no-save aws-lambda-ric@3.3.0` into a temporary sibling, checks the tarball's
 * integrity against the one pinned here and the built client, and renames the temporary directory into
 * place: a killed install leaves only a temporary directory, which later callers ignore and remove. A lock
 * file beside the cache (its holder's pid) makes concurrent callers (the test files' processes) wait for one
 * build rather than run two; should two build anyway (a stale lock taken twice), the first rename wins and
 * the other's copy is dropped.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, createWriteStream, existsSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, statSync, unlinkSync, writeFileSync, writeSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { missingBuildTools, RIC_APT_COMMAND } from '../../cloud/doctor/build-tools.ts';

export { missingBuildTools, RIC_APT_COMMAND, RIC_BUILD_TOOLS } from '../../cloud/doctor/build-tools.ts';

export const RIC_PACKAGE = 'aws-lambda-ric';
export const RIC_VERSION = '3.3.0';
/** The registry tarball's integrity (as npm records it); an install of anything else is refused. */
export const RIC_INTEGRITY = 'sha512-9p06TbKVK4a050NY/vYOxhMHvnIiUu5o1W0//q6yNLSqA/c91pn4BOj3C3sRTpplkUNsGJdU5qWyU2STo6L8hA==';

/** The cache directory: ESOPT_LAMBDA_RIC_DIR, else ~/.cache/esopt/aws-lambda-ric-3.3.0. */
export function defaultRuntimeClientCache(env: NodeJS.ProcessEnv = process.env): string {
  return env.ESOPT_LAMBDA_RIC_DIR || join(homedir(), '.cache', 'esopt', `${RIC_PACKAGE}-${RIC_VERSION}`);
}

/** The package's directory in an install at `prefix` when that install is complete and the pinned one, else null. */
export function installedRuntimeClient(prefix: string): string | null {
  const dir = join(prefix, 'node_modules', RIC_PACKAGE);
  try {
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version?: string };
    const lock = JSON.parse(readFileSync(join(prefix, 'node_modules', '.package-lock.json'), 'utf8')) as { packages?: Record<string, { integrity?: string }> };
    if (pkg.version !== RIC_VERSION || lock.packages?.[`node_modules/${RIC_PACKAGE}`]?.integrity !== RIC_INTEGRITY) return null;
    // What execution-environment.ts runs: the entry point and the native client the install built.
    if (!existsSync(join(dir, 'bin', 'index.mjs')) || !existsSync(join(dir, 'dist', 'rapid-client.node'))) return null;
    return dir;
  } catch {
    return null;
  }
}

export type Installer = (prefix: string, o: { path: string; log: (line: string) => void }) => Promise<void>;

/** `npm install --prefix <prefix> --no-save aws-lambda-ric@3.3.0`, its output to <prefix>/npm-install.log, a line every 15 s. */
export const npmInstall: Installer = (prefix, o) =>
  new Promise<void>((resolve, reject) => {
    const logFile = join(prefix, 'npm-install.log');
    // The prefix's own package.json approves the package's install scripts (npm's allowScripts), nothing else.
    writeFileSync(join(prefix, 'package.json'), `${JSON.stringify({ private: true, allowScripts: { [RIC_PACKAGE]: true } }, null, 2)}\n`);
    const out = createWriteStream(logFile);
    const started = Date.now();
    const child = spawn('npm', ['install', '--prefix', prefix, '--no-save', '--no-audit', '--no-fund', '--ignore-scripts=false', `${RIC_PACKAGE}@${RIC_VERSION}`], {
      cwd: prefix,
      env: { ...process.env, PATH: o.path },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.pipe(out, { end: false });
    child.stderr.pipe(out, { end: false });
    const beat = setInterval(() => o.log(`${RIC_PACKAGE}: still building (${Math.round((Date.now() - started) / 1000)} s; log ${logFile})`), 15_000);
    const done = (err: Error | null) => {
      clearInterval(beat);
      out.end(() => {
        if (!err) return resolve();
        let tail = '';
        try {
          tail = readFileSync(logFile, 'utf8').trimEnd().split('\n').slice(-25).join('\n');
        } catch {
          // no log
        }
        reject(new Error(`${err.message}${tail ? `; the last lines of its log:\n${tail}` : ''}`));
      });
    };
    child.once('error', (err) => done(new Error(`could not run npm: ${err.message}`)));
    child.once('exit', (code, signal) => done(code === 0 ? null : new Error(`npm install ${RIC_PACKAGE}@${RIC_VERSION} failed (${signal ?? `exit ${code}`})`)));
  });

export interface RuntimeClientOptions {
  /** The cache (an npm prefix); default defaultRuntimeClientCache(). */
  cacheDir?: string;
  /** Where the build tools are looked for, and npm's PATH; default process.env.PATH. */
  path?: string;
  /** Progress lines; default stderr. */
  log?: (line: string) => void;
  /** How the package is installed into a prefix; default npmInstall (tests pass their own). */
  install?: Installer;
  /** How often a waiting caller looks again (ms). */
  pollMs?: number;
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/** Temporary installs beside the cache whose process is gone: a killed install's leftovers. */
function removeAbandoned(cacheDir: string): void {
  const prefix = `${basename(cacheDir)}.tmp-`;
  let names: string[];
  try {
    names = readdirSync(dirname(cacheDir));
  } catch {
    return;
  }
  for (const name of names) {
    if (!name.startsWith(prefix)) continue;
    const pid = Number(name.slice(prefix.length).split('-')[0]);
    if (Number.isInteger(pid) && pid > 0 && alive(pid)) continue;
    rmSync(join(dirname(cacheDir), name), { recursive: true, force: true });
  }
}

/** An install takes a minute or two; a lock older than this is stale whoever holds it. */
const LOCK_STALE_MS = 30 * 60_000;

/** Takes the lock (true), or says who holds it; a lock whose holder is gone is removed and taken. */
function tryLock(lock: string): true | number {
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(lock, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    let holder = NaN;
    let age = 0;
    try {
      age = Date.now() - statSync(lock).mtimeMs;
      holder = Number(readFileSync(lock, 'utf8').trim());
    } catch {
      continue; // released meanwhile
    }
    // An empty lock is one being written (its holder alive) unless it is old; past LOCK_STALE_MS a holder's
    // pid is taken to be another process's by now.
    const named = Number.isInteger(holder) && holder > 0;
    if (age < (named ? LOCK_STALE_MS : 10_000)) {
      if (!named) return 0;
      if (alive(holder)) return holder;
    }
    try {
      unlinkSync(lock);
    } catch {
      // another caller removed it first
    }
  }
  return 0;
}

async function install(cacheDir: string, o: Required<Pick<RuntimeClientOptions, 'path' | 'log' | 'install'>>): Promise<string> {
  const temp = `${cacheDir}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  mkdirSync(temp, { recursive: true });
  const started = Date.now();
  o.log(`installing ${RIC_PACKAGE} ${RIC_VERSION} (the rehearsal's Lambda runtime client; it compiles curl and aws-lambda-cpp, about 1.5 min) into ${cacheDir} …`);
  try {
    await o.install(temp, { path: o.path, log: o.log });
    if (!installedRuntimeClient(temp)) throw new Error(`npm installed ${RIC_PACKAGE} into ${temp}, but not version ${RIC_VERSION} with integrity ${RIC_INTEGRITY} and its built client (dist/rapid-client.node)`);
    try {
      renameSync(temp, cacheDir);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOTEMPTY' && code !== 'EEXIST') throw err;
      // Another install won the rename, or an incomplete directory is in the way.
      if (!installedRuntimeClient(cacheDir)) {
        const aside = `${cacheDir}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
        renameSync(cacheDir, aside);
        rmSync(aside, { recursive: true, force: true });
        renameSync(temp, cacheDir);
      }
    }
  } finally {
    rmSync(temp, { recursive: true, force: true });
  }
  o.log(`${RIC_PACKAGE} ${RIC_VERSION} installed in ${Math.round((Date.now() - started) / 1000)} s`);
  return installedRuntimeClient(cacheDir)!;
}

/** The directory of the runtime client's package, installed into the cache first when it is not there. */
export async function ensureRuntimeClient(o: RuntimeClientOptions = {}): Promise<string> {
  const cacheDir = o.cacheDir ?? defaultRuntimeClientCache();
  const ready = installedRuntimeClient(cacheDir);
  if (ready) return ready;
  const path = o.path ?? process.env.PATH ?? '';
  const missing = missingBuildTools(path);
  if (missing.length) {
    throw new Error(
      `the deploy rehearsal's Lambda runtime client (${RIC_PACKAGE} ${RIC_VERSION}) is not installed in ${cacheDir}, and its install compiles native code ` +
        `with build tools that are not on PATH: ${missing.map((m) => (m.command === m.package ? m.command : `${m.command} (${m.package})`)).join(', ')}. ` +
        `On Debian: sudo ${RIC_APT_COMMAND}`,
    );
  }
  const log = o.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  mkdirSync(dirname(cacheDir), { recursive: true });
  const lock = `${cacheDir}.lock`;
  let waitingOn = 0;
  for (;;) {
    const done = installedRuntimeClient(cacheDir);
    if (done) return done;
    const held = tryLock(lock);
    if (held === true) {
      try {
        removeAbandoned(cacheDir);
        return installedRuntimeClient(cacheDir) ?? (await install(cacheDir, { path, log, install: o.install ?? npmInstall }));
      } finally {
        rmSync(lock, { force: true });
      }
    }
    if (held && held !== waitingOn) log(`waiting for process ${held} to install ${RIC_PACKAGE} ${RIC_VERSION} into ${cacheDir} …`);
    waitingOn = held;
    await new Promise((resolve) => setTimeout(resolve, o.pollMs ?? 1000));
  }
}

const resolved = new Map<string, Promise<string>>();

/**
 * The runtime client's directory for this process's execution environments: the default cache, installed
 * once per process at most (a failed install is tried again by the next caller).
 */
export function runtimeClientDir(): Promise<string> {
  const cacheDir = defaultRuntimeClientCache();
  let p = resolved.get(cacheDir);
  if (!p) {
    p = ensureRuntimeClient({ cacheDir });
    resolved.set(cacheDir, p);
    p.catch(() => resolved.delete(cacheDir));
  }
  return p;
}
