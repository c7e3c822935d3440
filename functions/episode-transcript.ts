/**
 * An episode's transcript as the Episode function stores it next to the reward record
 * (`keys.transcript(run, iteration, member, task)`), bounded in size: every text is cut to
 * `MAX_TEXT_CHARS`, and entries past `MAX_TRANSCRIPT_BYTES` are left out. Whatever was cut says so —
 * a text ends in a "[… N characters cut]" marker, and `truncated` counts the entries left out — so a
 * reader never takes a shortened transcript for the whole episode.
 */
import { z } from 'zod';
import { FramesNote, Iteration, MemberRef, RunId, TaskId } from '../shared/schemas/index.ts';
import { TranscriptEntry } from '../environments/episode-runner.ts';

/** A web page's observation can be megabytes; nobody reads that much of one step. */
export const MAX_TEXT_CHARS = 16_384;
/** One transcript object at most this large (UTF-8 JSON), the marker included. */
export const MAX_TRANSCRIPT_BYTES = 262_144;

export const StoredTranscript = z.object({
  run: RunId,
  iteration: Iteration,
  member: MemberRef,
  task: TaskId,
  entries: z.array(TranscriptEntry),
  /** Null when the transcript is whole. */
  truncated: z
    .object({
      /** Entries of the episode left out at the end. */
      omittedEntries: z.number().int().min(0),
      /** Texts cut to MAX_TEXT_CHARS (each ends in its own marker). */
      cutTexts: z.number().int().min(0),
      note: z.string(),
    })
    .nullable(),
  /**
   * The screenshots the trace kept (episode-frames.ts): each observation names its own in `frame`. Absent when the
   * environment drew none (or the episode is not one whose frames are kept).
   */
  frames: FramesNote.optional(),
});
export type StoredTranscript = z.infer<typeof StoredTranscript>;

const bytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value), 'utf8');

function cutText(text: string): string {
  return text.length <= MAX_TEXT_CHARS ? text : `${text.slice(0, MAX_TEXT_CHARS)}[… ${text.length - MAX_TEXT_CHARS} characters cut]`;
}

export function boundTranscript(about: Omit<StoredTranscript, 'entries' | 'truncated'>, transcript: readonly TranscriptEntry[], maxBytes = MAX_TRANSCRIPT_BYTES): StoredTranscript {
  let cutTexts = 0;
  const entries = transcript.map((e) => {
    const text = cutText(e.text);
    if (text === e.text) return e;
    cutTexts++;
    return { ...e, text };
  });
  // Room for the envelope and the longest possible marker.
  const marker = (omitted: number): StoredTranscript['truncated'] =>
    omitted === 0 && cutTexts === 0
      ? null
      : { omittedEntries: omitted, cutTexts, note: `transcript shortened to fit ${maxBytes} bytes: ${omitted} of ${transcript.length} entries left out at the end, ${cutTexts} text(s) cut to ${MAX_TEXT_CHARS} characters` };
  let used = bytes({ ...about, entries: [], truncated: marker(transcript.length) });
  let kept = 0;
  for (const e of entries) {
    const size = bytes(e) + 1;
    if (used + size > maxBytes) break;
    used += size;
    kept++;
  }
  return { ...about, entries: entries.slice(0, kept), truncated: marker(entries.length - kept) };
}
