/**
 * RunConfig `targets` (shared/targets.ts): what the schema accepts and refuses (with the field path),
 * how patterns match tensor names (segment shorthands, regexes, excludes, all-linear), and the errors a
 * pattern that matches nothing gives, naming the pattern and a few tensors.
 */
import { describe, expect, it } from 'vitest';
import { RunConfig, type RunConfigInput } from '../../shared/schemas/index.ts';
import { patternMatches, selectTargets, Targets, targetsAll, type TargetCandidate } from '../../shared/targets.ts';

const base: RunConfigInput = {
  environment: { name: 'sudoku', options: {} },
  model: { preset: 'tiny', seed: 0 },
  es: { population: 4, sigma: 0.05, alpha: 0.05 },
  iterations: 1,
};

const layer = (l: number): TargetCandidate[] => [
  { name: `model.layers.${l}.input_layernorm.weight`, linear: false },
  ...['q_proj', 'k_proj', 'v_proj', 'o_proj'].map((p) => ({ name: `model.layers.${l}.self_attn.${p}.weight`, linear: true })),
  ...['gate_proj', 'up_proj', 'down_proj'].map((p) => ({ name: `model.layers.${l}.mlp.${p}.weight`, linear: true })),
];
const tensors: TargetCandidate[] = [
  { name: 'model.embed_tokens.weight', linear: false, tiedHead: ['lm_head.weight'] },
  ...layer(0),
  ...layer(1),
  { name: 'model.norm.weight', linear: false },
];
const names = (t: Parameters<typeof Targets.parse>[0]) => selectTargets(Targets.parse(t), tensors, "full mode's tensors").map((i) => tensors[i].name);

describe('the targets field', () => {
  it('defaults to all, and an old config without it parses to all', () => {
    expect(RunConfig.parse(base).targets).toBe('all');
    expect(targetsAll(RunConfig.parse(base).targets)).toBe(true);
    expect(targetsAll(Targets.parse({ include: 'all' }))).toBe(true);
    expect(targetsAll(Targets.parse({ include: 'all', exclude: ['norm'] }))).toBe(false);
    expect(targetsAll(Targets.parse('all-linear'))).toBe(false);
  });

  it('refuses bad values with the field path', () => {
    const issue = (targets: unknown) => RunConfig.safeParse({ ...base, targets }).error?.issues[0];
    expect(issue({ include: ['q_proj', '(unclosed'] })).toMatchObject({ path: ['targets', 'include', 1] });
    expect(issue({ include: ['q_proj', '(unclosed'] })?.message).toMatch(/not a valid regular expression/);
    expect(issue({ include: ['q_proj'], exclude: ['[z-a]'] })).toMatchObject({ path: ['targets', 'exclude', 0] });
    expect(issue({ include: [] })?.message).toMatch(/at least one pattern/);
    expect(issue({ include: [''] })).toMatchObject({ path: ['targets', 'include', 0], message: 'must not be empty' });
    expect(issue({ include: ['q_proj'], only: true })).toMatchObject({ code: 'unrecognized_keys' });
    expect(RunConfig.safeParse({ ...base, targets: 'all_linear' }).success).toBe(false);
  });
});

describe('matching', () => {
  it('a word pattern (or a comma list of them) matches a whole name segment; anything else is a regex', () => {
    expect(patternMatches('q_proj', 'model.layers.0.self_attn.q_proj.weight')).toBe(true);
    expect(patternMatches('proj', 'model.layers.0.self_attn.q_proj.weight')).toBe(false);
    expect(patternMatches('q_proj,v_proj', 'model.layers.0.self_attn.v_proj.weight')).toBe(true);
    expect(patternMatches('_proj\\.weight$', 'model.layers.0.self_attn.v_proj.weight')).toBe(true);
    expect(patternMatches('layers\\.1\\.', 'model.layers.10.mlp.up_proj.weight')).toBe(false);
  });

  it('selects by include less exclude, all-linear, in θ order', () => {
    expect(names('all')).toHaveLength(tensors.length);
    expect(names({ include: ['q_proj,v_proj'] })).toEqual([0, 1].flatMap((l) => [`model.layers.${l}.self_attn.q_proj.weight`, `model.layers.${l}.self_attn.v_proj.weight`]));
    expect(names('all-linear')).toEqual(tensors.filter((t) => t.linear).map((t) => t.name));
    expect(names('all-linear')).not.toContain('model.embed_tokens.weight');
    expect(names({ include: 'all', exclude: ['embed_tokens', 'norm\\.weight$'] })).toEqual(tensors.filter((t) => t.linear).map((t) => t.name));
    expect(names({ include: 'all-linear', exclude: ['mlp'] })).toHaveLength(8);
    expect(names({ include: ['^model\\.layers\\.1\\.'], exclude: ['input_layernorm'] })).toEqual(layer(1).slice(1).map((t) => t.name));
  });

  it('a pattern that matches nothing, or a choice that leaves nothing, is an error naming it and a few tensors', () => {
    expect(() => names({ include: ['q_proj', 'q_prj'] })).toThrow(/targets\.include\[1\]: "q_prj" matches none of full mode's tensors: model\.embed_tokens\.weight, .*… \(18 in all\)/);
    expect(() => names({ include: ['q_proj'], exclude: ['bias'] })).toThrow(/targets\.exclude\[0\]: "bias" matches none/);
    expect(() => names({ include: ['q_proj'], exclude: ['self_attn'] })).toThrow(/leaves none of full mode's tensors to perturb/);
    // the tied head is one tensor with the embedding: naming it alone is refused with the reason
    expect(() => names({ include: ['lm_head'] })).toThrow(/the LM head is tied to "model\.embed_tokens\.weight" and is one tensor with it/);
    expect(() => selectTargets('all-linear', tensors.filter((t) => !t.linear), 'x')).toThrow(/"all-linear" finds no 2-D matmul weight/);
  });
});
