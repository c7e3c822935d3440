/**
 * The frame recorder's bounds: what an episode's trace keeps of its screenshots, what it leaves out and says
 * so, and that a transcript never names a frame that did not land in the store.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runEpisode } from '../../environments/episode-runner.ts';
import { FRAME_LIMITS, frameRecorder, isPng } from '../../functions/episode-frames.ts';
import type { ObjectStore } from '../../shared/ports/object-store.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { colourAt, counterDefinition, counterPage, solidPng } from './counter-page.ts';

const EPISODE = { run: 'eval-frames', iteration: 0, member: 'base' as const, task: 'count-to-3' };
const task = { target: 3 };
const observedFrames = (transcript: Awaited<ReturnType<typeof runEpisode>>['transcript']) =>
  transcript.flatMap((e) => (e.kind === 'observation' ? [[e.step, e.frame ?? null] as const] : []));

async function play(store: ObjectStore, limits = FRAME_LIMITS, environment = counterPage(task)) {
  const recorder = frameRecorder(store, EPISODE, limits);
  const result = await runEpisode({ environment, policy: counterDefinition.oracle(task, {}), seed: 0, frames: recorder.sink });
  return recorder.settle(result);
}

describe('frameRecorder', () => {
  it("keeps every step's PNG under the episode's own keys, as drawn, and the transcript names each", async () => {
    const store = new FsObjectStore(mkdtempSync(join(tmpdir(), 'esopt-frames-')));
    const { result, note } = await play(store);
    expect(result.reward).toBe(1);
    expect(note).toEqual({ kept: 5, omitted: 0, reasons: [] });
    const frames = observedFrames(result.transcript);
    expect(frames.map(([step]) => step)).toEqual([0, 1, 2, 3, 4]);
    for (const [step, key] of frames) {
      expect(key).toMatch(new RegExp(`^runs/eval-frames/iterations/00000000/frames/base/count-to-3/a[0-9a-f]{12}/${String(step).padStart(5, '0')}\\.png$`));
      expect(await store.get(key!)).toEqual(solidPng(48, 32, colourAt(Math.min(step, 3))));
    }
    // A second delivery of the same episode writes under an attempt of its own.
    const again = observedFrames((await play(store)).result.transcript);
    expect(again[0]![1]).not.toBe(frames[0]![1]);
  });

  it('leaves out frames past the count, past the episode\'s bytes and over the frame bound, and says why', async () => {
    const store = new FsObjectStore(mkdtempSync(join(tmpdir(), 'esopt-frames-')));
    const size = (count: number) => solidPng(48, 32, colourAt(count)).byteLength;
    const one = Math.min(size(0), size(1), size(2), size(3));
    // Room for the first three frames (counts 0, 1, 2) and not a byte more.
    const three = size(0) + size(1) + size(2);
    const counted = await play(store, { ...FRAME_LIMITS, frames: 2 });
    expect(observedFrames(counted.result.transcript).map(([, key]) => key !== null)).toEqual([true, true, false, false, false]);
    expect(counted.note).toEqual({ kept: 2, omitted: 3, reasons: ['3 frame(s) past the first 2 frames'] });
    const bytes = await play(store, { ...FRAME_LIMITS, episodeBytes: three });
    expect(bytes.note).toEqual({ kept: 3, omitted: 2, reasons: [`2 frame(s) past ${three} bytes for the episode`] });
    const big = await play(store, { ...FRAME_LIMITS, frameBytes: one - 1 });
    expect(big.note).toEqual({ kept: 0, omitted: 5, reasons: [`5 frame(s) over ${one - 1} bytes`] });
    expect(observedFrames(big.result.transcript).every(([, key]) => key === null)).toBe(true);
    // The episode itself never noticed: same play, same reward.
    expect([counted.result.reward, bytes.result.reward, big.result.reward]).toEqual([1, 1, 1]);
  });

  it('refuses what is not a PNG, and takes a frame whose write failed out of the transcript', async () => {
    expect(isPng(solidPng(2, 2, [0, 0, 0]))).toBe(true);
    expect(isPng(new TextEncoder().encode('<svg/>'))).toBe(false);
    const notPng = { ...counterPage(task), screenshot: async () => new TextEncoder().encode('GIF89a…') };
    const refused = await play(new FsObjectStore(mkdtempSync(join(tmpdir(), 'esopt-frames-'))), FRAME_LIMITS, notPng);
    expect(refused.note).toEqual({ kept: 0, omitted: 5, reasons: ['5 frame(s) not a PNG'] });

    const fs = new FsObjectStore(mkdtempSync(join(tmpdir(), 'esopt-frames-')));
    let puts = 0;
    // The third write fails: the store is down for a moment.
    const flaky: ObjectStore = Object.assign(Object.create(fs) as ObjectStore, {
      put: async (key: string, body: Uint8Array | string, options?: Parameters<ObjectStore['put']>[2]) => {
        if (++puts === 3) throw new Error('503 Slow Down');
        return fs.put(key, body, options);
      },
    });
    const { result, note } = await play(flaky);
    expect(note).toEqual({ kept: 4, omitted: 1, reasons: ['1 frame(s) the store refused the write'] });
    const frames = observedFrames(result.transcript);
    expect(frames.map(([, key]) => key !== null)).toEqual([true, true, false, true, true]);
    for (const [, key] of frames) if (key) expect(await fs.get(key)).not.toBeNull();
  });
});
