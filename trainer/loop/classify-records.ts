/**
 * Which reward records of an iteration count. Pure: a snapshot of (key, body) pairs from the store in,
 * the per-member rewards and an account of everything left out. Each (member, task) counts at most once;
 * a failed episode is left out unless the run gives failed episodes a reward; anything that does not
 * parse, does not match its key, or names a member or task the manifest does not have is reported as
 * invalid. `base` records (evaluation episodes) live under the same prefix and are not members: skipped.
 */
import { parseRewardKey } from '../../shared/keys.ts';
import { RewardRecord, type IterationManifest } from '../../shared/schemas/index.ts';

export interface StoredObject {
  key: string;
  body: Uint8Array;
}

export interface CountedRecord {
  member: number;
  task: string;
  reward: number;
  record: RewardRecord;
}

export interface Classification {
  counted: CountedRecord[];
  /** member index → rewards of its counted episodes, in task order of the manifest. */
  rewards: Map<number, number[]>;
  failures: Array<{ member: number; task: string; error: string }>;
  invalid: Array<{ key: string; reason: string }>;
  duplicates: number;
  /** Member records that arrived (counted, failed or duplicate), for the quorum. */
  arrived: number;
}

const decoder = new TextDecoder();

export function classifyRecords(manifest: IterationManifest, objects: readonly StoredObject[], failedEpisodeReward: number | null): Classification {
  const members = new Set(manifest.members.map((m) => m.index));
  const taskOrder = new Map(manifest.tasks.map((t, i) => [t.id, i]));
  const seen = new Set<string>();
  const counted: CountedRecord[] = [];
  const failures: Classification['failures'] = [];
  const invalid: Classification['invalid'] = [];
  let duplicates = 0;

  for (const { key, body } of objects) {
    const k = parseRewardKey(key);
    if (!k || k.run !== manifest.run || k.iteration !== manifest.iteration) {
      invalid.push({ key, reason: 'not a reward key of this iteration' });
      continue;
    }
    if (k.member === 'base') continue;
    if (!members.has(k.member)) {
      invalid.push({ key, reason: `member ${k.member} is not in the manifest` });
      continue;
    }
    if (!taskOrder.has(k.task)) {
      invalid.push({ key, reason: `task ${k.task} is not in the manifest` });
      continue;
    }
    let json: unknown;
    try {
      json = JSON.parse(decoder.decode(body));
    } catch {
      invalid.push({ key, reason: 'body is not JSON' });
      continue;
    }
    const parsed = RewardRecord.safeParse(json);
    if (!parsed.success) {
      invalid.push({ key, reason: parsed.error.issues.map((i) => `${i.path.join('.') || '(record)'}: ${i.message}`).join('; ') });
      continue;
    }
    const r = parsed.data;
    if (r.run !== k.run || r.iteration !== k.iteration || r.member !== k.member || r.task !== k.task) {
      invalid.push({ key, reason: `record names ${r.run}/${r.iteration}/${r.member}/${r.task}, its key another` });
      continue;
    }
    const id = `${k.member}/${k.task}`;
    if (seen.has(id)) {
      duplicates++;
      continue;
    }
    seen.add(id);
    if (r.error !== null) {
      failures.push({ member: k.member, task: k.task, error: r.error });
      if (failedEpisodeReward === null) continue;
      counted.push({ member: k.member, task: k.task, reward: failedEpisodeReward, record: r });
      continue;
    }
    counted.push({ member: k.member, task: k.task, reward: r.reward, record: r });
  }

  // Canonical order (member, then manifest task order): the update must not depend on listing order.
  counted.sort((a, b) => a.member - b.member || taskOrder.get(a.task)! - taskOrder.get(b.task)!);
  const rewards = new Map<number, number[]>();
  for (const c of counted) {
    const list = rewards.get(c.member) ?? [];
    list.push(c.reward);
    rewards.set(c.member, list);
  }
  return { counted, rewards, failures, invalid, duplicates, arrived: seen.size };
}
