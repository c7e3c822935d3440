/**
 * A small counter page of the tests' own that stands in for a web page: an Environment that draws a real PNG
 * of its state each step, with a good and a failing scripted agent. Imports nothing of environments/index.ts,
 * so a test's mock of that module can load it.
 */
import { deflateSync } from 'node:zlib';
import { z } from 'zod';
import type { Environment, EnvironmentDefinition } from '../../environments/environment.ts';
import type { Policy, PolicyReply } from '../../shared/ports/policy.ts';

// ---------------------------------------------------------------- a real PNG, by hand

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (const b of bytes) c = CRC_TABLE[(c ^ b) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

function chunk(type: string, data: Uint8Array): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'ascii');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

/** A solid-colour RGB PNG of `width`×`height`, as any decoder (Chromium's included) reads it. */
export function solidPng(width: number, height: number, [r, g, b]: readonly [number, number, number]): Uint8Array {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 2, 0, 0, 0], 8); // 8-bit RGB, no interlace
  const row = Buffer.concat([Buffer.from([0]), Buffer.from(Array.from({ length: width }, () => [r, g, b]).flat())]);
  const raw = Buffer.concat(Array.from({ length: height }, () => row));
  return new Uint8Array(Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr), chunk('IDAT', deflateSync(raw)), chunk('IEND', new Uint8Array())]));
}

/** The colour the counter page is drawn in at `count`: each state its own, so a test can tell the frames apart. */
export const colourAt = (count: number): [number, number, number] => [(40 * count) % 256, 120, 200 - 30 * count];
export const FRAME_SIZE = { width: 48, height: 32 } as const;

// ---------------------------------------------------------------- the counter page

export const CounterTask = z.object({ target: z.number().int().min(1).max(5) }).strict();
export type CounterTask = z.infer<typeof CounterTask>;

/** Press `next` until the counter shows the target, then `submit`: reward 1 when it does, 0 otherwise. */
export function counterPage(task: CounterTask): Environment {
  let count = 0;
  return {
    horizon: task.target + 2,
    systemPrompt: 'Reply with one action: next, or submit.',
    async reset() {
      count = 0;
      return `Counter: 0. Goal: make it ${task.target}, then submit.`;
    },
    async step(reply: PolicyReply) {
      const action = reply.text.trim();
      if (action === 'next') {
        count++;
        return { observation: `Counter: ${count}.`, done: false, info: { ok: true } };
      }
      if (action === 'submit') return { observation: `Submitted ${count}.`, done: true, reward: count === task.target ? 1 : 0, info: { ok: true } };
      return { observation: `Error: no action "${action}". Counter: ${count}.`, done: false, info: { ok: false, error: `no action "${action}"` } };
    },
    async screenshot() {
      return solidPng(FRAME_SIZE.width, FRAME_SIZE.height, colourAt(count));
    },
    async close() {},
  };
}

const reply = (text: string): PolicyReply => ({ text, tokens: { prompt: 100, completion: 10 }, inferenceMs: 1 });

/** The good agent: next × target, then submit. The bad one: an action that does not exist, then submit at 0. */
export const counterDefinition: EnvironmentDefinition<CounterTask, Record<string, unknown>> = {
  name: 'web',
  taskSchema: CounterTask,
  optionsSchema: z.record(z.string(), z.unknown()),
  create: async (task) => counterPage(task),
  sampleTasks: () => [],
  oracle: (task): Policy => ({ act: async (_m, { step }) => reply(step < task.target ? 'next' : 'submit') }),
  random: (): Policy => ({ act: async (_m, { step }) => reply(step === 0 ? 'jump' : 'submit') }),
};
