/**
 * Which of an iteration's records count. Pure: the collector's snapshot (already one record per
 * (member, task), each matching its key) in, the per-member rewards and an account of everything left out.
 * A failed episode is left out unless the run gives failed episodes a reward; a record naming a member
 * or task the manifest does not have is invalid. `base` records (evaluation episodes) share the prefix
 * and are not members: skipped.
 */
import type { IterationManifest, RewardRecord } from '../../../shared/schemas/index.ts';
import type { CollectedRewards } from './reward-collector.ts';

export interface CountedRecord {
  member: number;
  task: string;
  reward: number;
  record: RewardRecord;
}

export interface Classification {
  counted: CountedRecord[];
  /** member index → rewards of its counted episodes, in the manifest's task order. */
  rewards: Map<number, number[]>;
  failures: Array<{ member: number; task: string; error: string }>;
  invalid: Array<{ key: string; reason: string }>;
  duplicates: number;
  /** Distinct member records that arrived (counted or failed): what the quorum and "all arrived" look at. */
  arrived: number;
}

export function classifyRecords(manifest: IterationManifest, collected: CollectedRewards, failedEpisodeReward: number | null): Classification {
  const members = new Set(manifest.members.map((m) => m.index));
  const taskOrder = new Map(manifest.tasks.map((t, i) => [t.id, i]));
  const counted: CountedRecord[] = [];
  const failures: Classification['failures'] = [];
  const invalid = [...collected.invalid];
  let arrived = 0;

  for (const r of collected.records) {
    if (r.member === 'base') continue;
    if (!members.has(r.member) || !taskOrder.has(r.task)) {
      invalid.push({ key: `${r.member}/${r.task}`, reason: !members.has(r.member) ? `member ${r.member} is not in the manifest` : `task ${r.task} is not in the manifest` });
      continue;
    }
    arrived++;
    if (r.error !== null) {
      failures.push({ member: r.member, task: r.task, error: r.error });
      if (failedEpisodeReward !== null) counted.push({ member: r.member, task: r.task, reward: failedEpisodeReward, record: r });
      continue;
    }
    counted.push({ member: r.member, task: r.task, reward: r.reward, record: r });
  }

  // Canonical order (member, then the manifest's task order): the update must not depend on listing order.
  counted.sort((a, b) => a.member - b.member || taskOrder.get(a.task)! - taskOrder.get(b.task)!);
  const rewards = new Map<number, number[]>();
  for (const c of counted) {
    const list = rewards.get(c.member) ?? [];
    list.push(c.reward);
    rewards.set(c.member, list);
  }
  return { counted, rewards, failures, invalid, duplicates: collected.duplicatesIgnored, arrived };
}
