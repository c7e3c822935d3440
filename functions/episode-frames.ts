/**
 * The screenshots of an evaluation episode, kept for its replay: the runner hands each step's PNG to
 * `sink` (environments/episode-runner.ts, `FrameSink`), which starts its create-only write to
 * `keys.frame(run, iteration, member, task, attempt, step)` and names that key at once, so a slow store
 * never holds a step (nor the episode's deadline) up. `settle` then waits for the writes and takes out of
 * the transcript every frame that did not land, so a stored transcript names only frames that exist.
 *
 * Bounded, as the PNG the environment produced (nothing is re-encoded): a frame over MAX_FRAME_BYTES, past
 * the first MAX_FRAMES_PER_EPISODE, or past MAX_EPISODE_FRAME_BYTES for the episode is not kept, and the
 * stored transcript's `frames` says how many were left out and why.
 */
import { randomBytes } from 'node:crypto';
import { keys, retentionTags } from '../shared/keys.ts';
import type { ObjectStore } from '../shared/ports/object-store.ts';
import type { FramesNote } from '../shared/schemas/index.ts';
import type { EpisodeResult, FrameSink, TranscriptEntry } from '../environments/episode-runner.ts';

/** A 1280×720 page is 50–500 KB as PNG; a frame past this is a page nobody needs at full size. */
export const MAX_FRAME_BYTES = 1_048_576;
/** Steps past this keep their text in the transcript, without a screenshot. */
export const MAX_FRAMES_PER_EPISODE = 64;
/** All of an episode's frames together (also the most a worker holds in flight for one episode). */
export const MAX_EPISODE_FRAME_BYTES = 16 * 1_048_576;

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];


export interface FrameRecorder {
  sink: FrameSink;
  /** The episode's result with only the frames that were written, and the note on what was kept. */
  settle(result: EpisodeResult): Promise<{ result: EpisodeResult; note: FramesNote }>;
}

export interface FrameLimits {
  frameBytes: number;
  frames: number;
  episodeBytes: number;
}

export const FRAME_LIMITS: FrameLimits = { frameBytes: MAX_FRAME_BYTES, frames: MAX_FRAMES_PER_EPISODE, episodeBytes: MAX_EPISODE_FRAME_BYTES };

export function isPng(bytes: Uint8Array): boolean {
  return bytes.length > PNG_SIGNATURE.length && PNG_SIGNATURE.every((b, i) => bytes[i] === b);
}

export function frameRecorder(store: ObjectStore, episode: { run: string; iteration: number; member: number | 'base'; task: string }, limits: FrameLimits = FRAME_LIMITS): FrameRecorder {
  // 12 hex digits of randomness: an id, unique per delivery of the episode.
  const attempt = `a${randomBytes(6).toString('hex')}`;
  const writes = new Map<string, Promise<boolean>>();
  const left: Record<string, number> = {};
  const leaveOut = (reason: string) => void (left[reason] = (left[reason] ?? 0) + 1);
  let bytes = 0;

  const sink: FrameSink = async (step, png) => {
    if (!isPng(png)) {
      leaveOut('not a PNG');
      throw new Error('not a PNG');
    }
    if (png.byteLength > limits.frameBytes) {
      leaveOut(`over ${limits.frameBytes} bytes`);
      throw new Error(`frame of ${png.byteLength} bytes is over ${limits.frameBytes}`);
    }
    if (writes.size >= limits.frames) {
      leaveOut(`past the first ${limits.frames} frames`);
      throw new Error(`past ${limits.frames} frames`);
    }
    if (bytes + png.byteLength > limits.episodeBytes) {
      leaveOut(`past ${limits.episodeBytes} bytes for the episode`);
      throw new Error(`past ${limits.episodeBytes} bytes of frames`);
    }
    const key = keys.frame(episode.run, episode.iteration, episode.member, episode.task, attempt, step);
    bytes += png.byteLength;
    // Tagged as transcripts are: the bucket's lifecycle expires a replay's pictures with its text.
    const write = store.put(key, png, { ifAbsent: true, contentType: 'image/png', tags: retentionTags.transcript }).catch(() => false);
    writes.set(key, write);
    return key;
  };

  async function settle(result: EpisodeResult): Promise<{ result: EpisodeResult; note: FramesNote }> {
    const landed = new Set<string>();
    await Promise.all([...writes].map(async ([key, write]) => void ((await write) && landed.add(key))));
    const failed = writes.size - landed.size;
    if (failed) left['the store refused the write'] = failed;
    const transcript = result.transcript.map((e): TranscriptEntry => {
      if (e.kind !== 'observation' || e.frame === undefined || landed.has(e.frame)) return e;
      const { frame: _dropped, ...rest } = e;
      return rest;
    });
    const omitted = Object.values(left).reduce((a, n) => a + n, 0);
    return { result: { ...result, transcript }, note: { kept: landed.size, omitted, reasons: Object.entries(left).map(([why, n]) => `${n} frame(s) ${why}`) } };
  }

  return { sink, settle };
}
