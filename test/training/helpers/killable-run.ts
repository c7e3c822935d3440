/**
 * The CLI runs the kill -9 resume tests share: one deterministic config (sudoku with the seeded random
 * scripted policy, so rewards vary by member but never depend on anything but seeds) and `esopt` as a
 * child in its own process group that, with a stop point, is SIGKILLed where the trainer stopped itself.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const BIN = join(import.meta.dirname, '../../../trainer/cli/bin.js');

export const ITERATIONS = 3;

export const baseConfig = {
  environment: { name: 'sudoku', options: { size: 4, blanks: 4, shapedReward: true, invalidMove: 'waste' } },
  tasks: { seed: 3, trainPerIteration: 2, evalCount: 2 },
  model: { preset: 'tiny', seed: 1 },
  // Schedules, so resume must also replay each iteration's own σ and α.
  es: { population: 6, sigma: { schedule: 'cosine', initial: 0.05, final: 0.02 }, alpha: { schedule: 'linear', initial: 0.05, final: 0.02, warmup: 1 }, weightDecay: 0.01 },
  iterations: ITERATIONS,
  evalInterval: 2,
  checkpointInterval: 2,
  policy: 'scripted:random',
  workers: 1,
  deadlineMs: 60_000,
  seed: 11,
};

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface Report {
  thetaHash: string;
  run: string;
  perIteration: unknown[];
  files: { report: string; curve: string };
}

/** Runs the CLI in its own process group; with `stopAt`, SIGKILLs the group once the trainer has stopped itself there. */
export function esopt(args: string[], stopAt?: string, env: Record<string, string> = {}): Promise<Exit> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...process.env, ...env, ...(stopAt ? { ESOPT_STOP_AT: stopAt } : {}) },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    let poll: NodeJS.Timeout | undefined;
    if (stopAt) {
      poll = setInterval(() => {
        // The trainer is the node process tsx runs in: stopped ('T') once it reached the point.
        const state = (() => {
          try {
            return readFileSync(`/proc/${child.pid}/stat`, 'utf8').split(') ')[1]?.[0];
          } catch {
            return undefined;
          }
        })();
        if (state === 'T') {
          clearInterval(poll);
          process.kill(-child.pid!, 'SIGKILL');
        }
      }, 20);
    }
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      clearInterval(poll);
      // Workers of a killed trainer are in its group; make sure none outlives it.
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* the group is gone */
      }
      resolve({ code, signal, stdout, stderr });
    });
  });
}
