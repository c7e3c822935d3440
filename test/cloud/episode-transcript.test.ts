/**
 * Transcripts from the Episode handler: a base-weights episode stores its transcript create-only next
 * to its record and names it there; a population member's does not; anything too large is cut with a
 * marker that says what was left out, and the stored object stays inside the byte bound.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEpisodeHandler } from '../../functions/episode.ts';
import { boundTranscript, MAX_TEXT_CHARS, StoredTranscript } from '../../functions/episode-transcript.ts';
import type { TranscriptEntry } from '../../environments/episode-runner.ts';
import { keys, retentionTags } from '../../shared/keys.ts';
import type { PutOptions } from '../../shared/ports/object-store.ts';
import { RewardRecord } from '../../shared/schemas/index.ts';
import { FsObjectStore } from '../../shared/store/fs.ts';
import { sudokuRequests } from './helpers/sudoku-plan.ts';
import { measuredPrices } from '../../trainer/fanout/measured-prices.ts';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'esopt-transcript-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const parse = <T>(schema: { parse(v: unknown): T }, body: Uint8Array | null) => (body === null ? null : schema.parse(JSON.parse(new TextDecoder().decode(body))));

describe('the Episode handler and transcripts', () => {
  it('stores a base episode\'s transcript under keys.transcript and links it from the record; members store none', async () => {
    const store = new FsObjectStore(dir);
    const handle = createEpisodeHandler({ prices: measuredPrices(), store, env: {}, memoryMb: 0, billedPerInvocation: false, log: { info() {}, error() {} } });
    const [member] = await sudokuRequests({ members: 1, tasks: 1 });
    const base = { ...member, member: 'base' as const };
    expect(await handle({ episodes: [base, member] })).toMatchObject({ ok: true });

    const record = parse(RewardRecord, await store.get(keys.reward(base.run, base.iteration, 'base', base.task.id)))!;
    const transcriptKey = keys.transcript(base.run, base.iteration, 'base', base.task.id);
    expect(record.transcriptKey).toBe(transcriptKey);
    const transcript = parse(StoredTranscript, await store.get(transcriptKey))!;
    expect(transcript).toMatchObject({ run: base.run, iteration: base.iteration, member: 'base', task: base.task.id, truncated: null });
    // The oracle solved it: one action per step, the last observation done with the record's reward.
    expect(transcript.entries.filter((e) => e.kind === 'action')).toHaveLength(record.steps);
    expect(transcript.entries.at(-1)).toMatchObject({ kind: 'observation', done: true, reward: record.reward });

    const memberRecord = parse(RewardRecord, await store.get(keys.reward(member.run, member.iteration, 0, member.task.id)))!;
    expect(memberRecord.transcriptKey).toBeNull();
    expect(await store.get(keys.transcript(member.run, member.iteration, 0, member.task.id))).toBeNull();

    // A re-delivery is skipped and leaves the first transcript as it was.
    const before = await store.get(transcriptKey);
    expect(await handle(base)).toMatchObject({ ok: true, outcomes: [{ duplicate: true }] });
    expect(await store.get(transcriptKey)).toEqual(before);
  });

  it("tags each transcript for the bucket's lifecycle (retentionTags.transcript), and nothing else it writes", async () => {
    const puts: { key: string; tags?: Record<string, string> }[] = [];
    const inner = new FsObjectStore(join(dir, 'tagged'));
    const store = Object.assign(Object.create(inner) as FsObjectStore, {
      put: (key: string, body: Uint8Array | string, options?: PutOptions) => {
        puts.push({ key, tags: options?.tags });
        return inner.put(key, body, options);
      },
    });
    const handle = createEpisodeHandler({ prices: measuredPrices(), store, env: {}, memoryMb: 0, billedPerInvocation: false, log: { info() {}, error() {} } });
    const [member] = await sudokuRequests({ run: 'tagged', members: 1, tasks: 1 });
    expect(await handle({ episodes: [{ ...member, member: 'base' as const }] })).toMatchObject({ ok: true });
    const transcriptKey = keys.transcript(member.run, member.iteration, 'base', member.task.id);
    expect(puts.find((p) => p.key === transcriptKey)?.tags).toEqual(retentionTags.transcript);
    expect(puts.filter((p) => p.key !== transcriptKey).every((p) => p.tags === undefined)).toBe(true);
    expect(puts.length).toBeGreaterThan(1);
  });

  it('a transcript that cannot be written leaves transcriptKey null, and the reward still lands', async () => {
    const root = join(dir, 'blocked');
    const store = new FsObjectStore(root);
    const lines: string[] = [];
    const handle = createEpisodeHandler({ prices: measuredPrices(), store, env: {}, memoryMb: 0, billedPerInvocation: false, log: { info() {}, error: (_f, m) => lines.push(m) } });
    const [request] = await sudokuRequests({ run: 'blocked', members: 1, tasks: 1 });
    const base = { ...request, member: 'base' as const };
    // A file where the transcripts directory would go: the store's write fails for real.
    const transcriptKey = keys.transcript(base.run, base.iteration, 'base', base.task.id);
    await mkdir(join(root, transcriptKey.split('/transcripts/')[0]), { recursive: true });
    await writeFile(join(root, `${transcriptKey.split('/transcripts/')[0]}/transcripts`), 'not a directory');
    expect(await handle(base)).toMatchObject({ ok: true, outcomes: [{ written: true }] });
    const record = parse(RewardRecord, await store.get(keys.reward(base.run, base.iteration, 'base', base.task.id)))!;
    expect(record).toMatchObject({ transcriptKey: null, error: null, reward: 1 });
    expect(lines).toContain('transcript not stored');
  });

  it('cuts long texts and drops entries past the byte bound, with a marker saying so', () => {
    const about = { run: 'r', iteration: 0, member: 'base' as const, task: 't' };
    const long = 'x'.repeat(MAX_TEXT_CHARS + 500);
    const entries: TranscriptEntry[] = [
      { kind: 'system', text: long },
      ...Array.from({ length: 50 }, (_, i): TranscriptEntry => ({ kind: 'observation', step: i, text: `board ${i} `.repeat(20), done: false })),
    ];
    const whole = boundTranscript(about, entries.slice(1));
    expect(whole.truncated).toBeNull();
    expect(whole.entries).toEqual(entries.slice(1));

    const maxBytes = 20_000;
    const cut = boundTranscript(about, entries, maxBytes);
    expect(Buffer.byteLength(JSON.stringify(cut))).toBeLessThanOrEqual(maxBytes);
    expect(cut.entries[0].text).toBe(`${'x'.repeat(MAX_TEXT_CHARS)}[… 500 characters cut]`);
    expect(cut.entries.length).toBeGreaterThan(1);
    expect(cut.entries.length).toBeLessThan(entries.length);
    // The kept entries are the episode's first ones, in order.
    expect(cut.entries.slice(1)).toEqual(entries.slice(1, cut.entries.length));
    expect(cut.truncated).toEqual({
      omittedEntries: entries.length - cut.entries.length,
      cutTexts: 1,
      note: expect.stringContaining(`${entries.length - cut.entries.length} of ${entries.length} entries left out`),
    });
    expect(StoredTranscript.parse(cut)).toEqual(cut);
  });
});
