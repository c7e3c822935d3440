/**
 * The local cloud for `bench fanout` in two child processes (trainer/dev/local-cloud/local-cloud-process.ts), s3rver in one and
 * the invoke endpoint with the Episode handler in the other, so the benchmark's process is only the trainer.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import type { InvokeFaultsInput } from '../../dev/local-cloud/invoke-faults.ts';
import { S3StoreConfig } from '../../../shared/store/s3.ts';

/** One part of the local cloud in a child process (trainer/dev/local-cloud/local-cloud-process.ts); resolves with its ready line. */
async function startCloudPart(args: string[]): Promise<{ ready: unknown; close(): Promise<void> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(new URL('../../dev/local-cloud/local-cloud-process.ts', import.meta.url)), ...args], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const line = await new Promise<string>((resolve, reject) => {
    let buffered = '';
    child.stdout.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const newline = buffered.indexOf('\n');
      if (newline >= 0) resolve(buffered.slice(0, newline));
    });
    child.once('exit', (code) => reject(new Error(`the local cloud's ${args[0]} process exited (code ${code}) before it was ready`)));
  });
  return {
    ready: JSON.parse(line),
    async close() {
      child.stdin.end();
      await exited;
    },
  };
}

/**
 * The local cloud in two child processes, s3rver in one and the invoke endpoint with the handler in the
 * other, so this process is only the trainer, and the bucket and the functions each have a core, as
 * they would have their own machines in AWS.
 */
export async function startCloudProcesses(faults: InvokeFaultsInput): Promise<{ invokeUrl: string; storeConfig: S3StoreConfig; close(): Promise<void> }> {
  const s3 = await startCloudPart(['s3']);
  try {
    const { storeConfig } = z.object({ storeConfig: S3StoreConfig }).parse(s3.ready);
    const invoke = await startCloudPart(['invoke', JSON.stringify(faults), JSON.stringify(storeConfig)]);
    const { invokeUrl } = z.object({ invokeUrl: z.url() }).parse(invoke.ready);
    return {
      invokeUrl,
      storeConfig,
      async close() {
        await invoke.close();
        await s3.close();
      },
    };
  } catch (err) {
    await s3.close();
    throw err;
  }
}

