/**
 * The contract as JSON Schema, for clients in other languages: every message that crosses a process or
 * network boundary (`esopt schemas` prints them).
 */
import { z } from 'zod';
import { CheckpointMeta, LogEntry } from './checkpoint.ts';
import { EpisodeRequest, RewardRecord } from './episode.ts';
import { IterationManifest, UpdateRecord } from './manifest.ts';
import { EvaluationResult, MetricsRow } from './metrics.ts';
import { RunConfig } from './run-config.ts';
import { EvaluationComparison, EvaluationResultFile } from './evaluation-results.ts';

/** The result file and the comparison leave with other teams: they are contract too. */
const CONTRACT = { RunConfig, IterationManifest, EpisodeRequest, RewardRecord, UpdateRecord, CheckpointMeta, LogEntry, MetricsRow, EvaluationResult, EvaluationResultFile, EvaluationComparison };
export type ContractName = keyof typeof CONTRACT;
export const CONTRACT_NAMES = Object.keys(CONTRACT) as ContractName[];

/** Each message's JSON Schema, as its input (defaults optional). */
export function jsonSchemas(): Record<ContractName, unknown> {
  return Object.fromEntries(Object.entries(CONTRACT).map(([k, v]) => [k, z.toJSONSchema(v, { io: 'input', unrepresentable: 'any' })])) as Record<ContractName, unknown>;
}
