/**
 * GRPO's group-relative advantage: within the G rollouts of one task, A_i = (R_i − mean R) / (std R + ε),
 * with the population standard deviation. A group whose rewards are all equal gets advantage 0 throughout
 * (nothing to prefer), which is why GRPO learns nothing from tasks every rollout solves or fails.
 */
export const ADVANTAGE_EPSILON = 1e-6;

export function groupAdvantages(rewards: readonly number[], epsilon = ADVANTAGE_EPSILON): number[] {
  if (rewards.length === 0) throw new RangeError('a GRPO group needs at least one rollout');
  const n = rewards.length;
  const mean = rewards.reduce((a, r) => a + r, 0) / n;
  const std = Math.sqrt(rewards.reduce((a, r) => a + (r - mean) ** 2, 0) / n);
  return rewards.map((r) => (r - mean) / (std + epsilon));
}
