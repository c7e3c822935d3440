/** The Pareto comparison of result files, and the canonical JSON their hashes are of. */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { canonicalJson, canonicalSha256 } from '../../shared/canonical-json.ts';
import { compareEvaluations } from '../../shared/evaluation-comparison.ts';
import { EvaluationResultFile } from '../../shared/schemas/index.ts';
import { wilsonInterval } from '../../shared/wilson.ts';
import { jsonSchemas } from '../../shared/schemas/json-schema.ts';

const TASKS = canonicalSha256([{ id: 't1', sha256: 'a'.repeat(64) }]);

function file(evaluation: string, successes: number, episodes: number, costPerEpisode: number, patch: Partial<EvaluationResultFile> = {}): EvaluationResultFile {
  return EvaluationResultFile.parse({
    version: 1,
    evaluation,
    createdAt: '2026-12-06T18:00:00.000Z',
    state: 'finished',
    stopReason: 'completed',
    model: { kind: 'external', baseUrl: 'https://a.example/v1', model: evaluation, hasApiKey: true, guidedDecoding: false, pricing: { usdPerMillionPromptTokens: 1, usdPerMillionCompletionTokens: 1 } },
    environmentOptions: {},
    instructions: null,
    suite: { name: 'mini', manifest: 'b'.repeat(64), environment: 'web', split: 'eval', tasks: 1, tasksSha256: TASKS },
    judge: { environment: 'web', version: 1, successThreshold: 1 },
    summary: {
      episodes,
      successes,
      failed: 0,
      successRate: episodes ? successes / episodes : 0,
      interval: wilsonInterval(successes, episodes),
      meanReward: episodes ? successes / episodes : null,
      totalCostUsd: costPerEpisode * episodes,
      meanCostUsdPerEpisode: episodes ? costPerEpisode : null,
    },
    tasks: [],
    ...patch,
  });
}

describe('compareEvaluations', () => {
  it('marks dominated evaluations with who dominates them, and the frontier cheapest first', () => {
    const out = compareEvaluations([file('cheap-weak', 2, 10, 0.01), file('strong', 9, 10, 0.1), file('worse', 2, 10, 0.05), file('middle', 5, 10, 0.05), file('strong-twin', 9, 10, 0.1)]);
    if (!out.ok) throw new Error(JSON.stringify(out.issues));
    const c = out.comparison;
    expect(c.evaluations.map((e) => [e.id, e.frontier, e.dominatedBy])).toEqual([
      ['cheap-weak', true, []],
      ['strong', true, []],
      // As successful as cheap-weak for more money, and beaten by middle at the same price.
      ['worse', false, ['cheap-weak', 'middle']],
      ['middle', true, []],
      // Equal points dominate neither way.
      ['strong-twin', true, []],
    ]);
    expect(c.frontier).toEqual(['cheap-weak', 'middle', 'strong', 'strong-twin']);
    expect(c.evaluations[1]!.interval).toEqual(wilsonInterval(9, 10));
  });

  it('refuses other tasks, another judge, repeats and evaluations with nothing to place, each at its place', () => {
    const out = compareEvaluations(
      [
        file('a', 1, 2, 0.1),
        file('b', 1, 2, 0.1, { suite: { name: 'mini', manifest: 'b'.repeat(64), environment: 'web', split: 'eval', tasks: 1, tasksSha256: 'c'.repeat(64) } }),
        file('c', 1, 2, 0.1, { judge: { environment: 'web', version: 2, successThreshold: 1 } }),
        file('d', 1, 2, 0.1, { judge: { environment: 'web', version: 1, successThreshold: 0.5 } }),
        file('a', 1, 2, 0.1),
        file('e', 0, 0, 0),
      ],
      'files',
    );
    expect(out.ok).toBe(false);
    if (out.ok) return;
    expect(out.issues.map((i) => i.path)).toEqual(['files.1', 'files.2', 'files.3', 'files.4', 'files.5']);
    expect(out.issues[0]!.message).toContain('b played other tasks than a');
    expect(out.issues[1]!.message).toContain('web judge v2, success at reward ≥ 1, not web judge v1');
    expect(out.issues[2]!.message).toContain('success at reward ≥ 0.5');
    expect(out.issues[3]!.message).toContain('a is given twice (also at files.0)');
    expect(out.issues[4]!.message).toContain('e has no episodes yet');
    expect(compareEvaluations([file('a', 1, 2, 0.1)])).toEqual({ ok: false, issues: [{ path: 'ids', message: 'compare at least 2 evaluations (1 given)' }] });
  });
});

describe('canonicalJson', () => {
  it('writes RFC 8785: keys sorted by UTF-16 code units, no whitespace, numbers as ECMAScript writes them', () => {
    // RFC 8785, 3.2.3's ordering example, in part: "\u20ac" (€) sorts after "\r", "1", "\u0080" and "ö".
    expect(canonicalJson({ '€': 'Euro Sign', '\r': 'Carriage Return', '1': 'One', '\u0080': 'Control', 'ö': 'Latin Small Letter O With Diaeresis' })).toBe(
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","ö":"Latin Small Letter O With Diaeresis","€":"Euro Sign"}',
    );
    expect(canonicalJson({ b: [1e21, 0.1, -0, true, null], a: { d: undefined, c: 'x' } })).toBe('{"a":{"c":"x"},"b":[1e+21,0.1,0,true,null]}');
    expect(canonicalSha256({ b: 1, a: 2 })).toBe(createHash('sha256').update('{"a":2,"b":1}').digest('hex'));
    expect(() => canonicalJson({ x: Number.NaN })).toThrow(/NaN/);
  });
});

describe('the result file as JSON Schema', () => {
  it('is part of the contract esopt schemas prints, every field required but none', () => {
    // Named by its meta id: the document refers to its own definition.
    const document = jsonSchemas().EvaluationResultFile as { $ref: string; $defs: Record<string, { properties: Record<string, { const?: unknown }>; required: string[]; additionalProperties: unknown }> };
    expect(document.$ref).toBe('#/$defs/EvaluationResultFile');
    const schema = document.$defs.EvaluationResultFile!;
    expect(schema.required.sort()).toEqual(['createdAt', 'environmentOptions', 'evaluation', 'instructions', 'judge', 'model', 'state', 'stopReason', 'suite', 'summary', 'tasks', 'version']);
    expect(schema.properties.version!.const).toBe(1);
    expect(schema.additionalProperties).toBe(false);
    expect(Object.keys(jsonSchemas())).toContain('EvaluationComparison');
  });
});
