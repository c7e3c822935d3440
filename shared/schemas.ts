/**
 * The contract: every message that crosses a process or network boundary, as zod schemas.
 * The schemas are the types (`z.infer`), and `jsonSchemas()` exports them as JSON Schema.
 */
import { z } from 'zod';
import * as S from './schemas/index.ts';

export * from './schemas/index.ts';

export function jsonSchemas(): Record<string, unknown> {
  const named = {
    RunConfig: S.RunConfig,
    IterationManifest: S.IterationManifest,
    EpisodeRequest: S.EpisodeRequest,
    RewardRecord: S.RewardRecord,
    UpdateRecord: S.UpdateRecord,
    CheckpointMeta: S.CheckpointMeta,
    LogEntry: S.LogEntry,
    MetricsRow: S.MetricsRow,
    EvaluationResult: S.EvaluationResult,
  };
  return Object.fromEntries(Object.entries(named).map(([k, v]) => [k, z.toJSONSchema(v, { io: 'input', unrepresentable: 'any' })]));
}
