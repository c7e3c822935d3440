/**
 * The one way the trainer starts another esopt process (a trainer replica, a benchmark's child, a
 * rehearsed client): the CLI's entry point, run by this Node, optionally pinned to a core with taskset.
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const BIN = fileURLToPath(new URL('../cli/bin.js', import.meta.url));

export interface EsoptProcessOptions extends SpawnOptions {
  /** Run on this core only (Linux taskset); the caller checks taskset exists. */
  core?: number;
}

/** `esopt <args…>` as a child process. */
export function spawnEsopt(args: readonly string[], o: EsoptProcessOptions = {}): ChildProcess {
  const { core, ...options } = o;
  return core === undefined ? spawn(process.execPath, [BIN, ...args], options) : spawn('taskset', ['-c', String(core), process.execPath, BIN, ...args], options);
}
