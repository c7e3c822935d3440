/**
 * Which of θ's tensors ES perturbs and updates (RunConfig `targets`): `all` (every tensor the mode
 * perturbs), `all-linear` (every 2-D matmul weight but the embedding table and the LM head, as PEFT's
 * `all-linear`), or `{ include, exclude }` with name patterns. A pattern made only of word characters and
 * commas (`q_proj,v_proj`, PEFT's `target_modules` written as one string) is a list of names, each matching
 * a tensor whose dot-separated name has it as a segment (`q_proj` matches `model.layers.0.self_attn.q_proj.weight`);
 * any other pattern is a JavaScript regular expression searched in the name (anchor it with ^…$ yourself), in
 * time linear in the name (shared/linear-pattern.ts: no lookarounds or \b, a bounded automaton).
 * Where the exporter named a weight after nothing (`onnx::MatMul_540`), the module of the MatMul that reads
 * it (`layers.0.self_attn.q_proj`, from the node's name) is matched too, the same way.
 *
 * A tensor's noise is read at its own offset in the member's stream, the same offset under every choice of
 * targets, so leaving tensors out never shifts the noise of the ones kept (shared/noise.ts, es.ts).
 */
import { z } from 'zod';
import { linearPattern, PatternError, searchLinear } from './linear-pattern.ts';

/** A pattern of word characters and commas: names of segments, not a regular expression. */
const SEGMENT_LIST = /^\w+(,\w+)*$/;

const Pattern = z
  .string()
  .min(1, 'must not be empty')
  .superRefine((p, ctx) => {
    if (SEGMENT_LIST.test(p)) return;
    try {
      new RegExp(p);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: `is not a valid regular expression: ${(err as Error).message}` });
      return;
    }
    // Matched in the trainer's process: only a pattern that searches in linear time is taken (linear-pattern.ts).
    try {
      linearPattern(p);
    } catch (err) {
      if (!(err instanceof PatternError)) throw err;
      ctx.addIssue({ code: 'custom', message: `cannot be searched in linear time: ${err.message}` });
    }
  });

const Preset = z.enum(['all', 'all-linear']);

export const Targets = z.union([
  Preset,
  z
    .object({
      include: z.union([Preset, z.array(Pattern).min(1, 'needs at least one pattern (or "all" / "all-linear")')]),
      exclude: z.array(Pattern).default([]),
    })
    .strict(),
]);
export type Targets = z.output<typeof Targets>;
export type TargetsInput = z.input<typeof Targets>;

/** A tensor a mode can perturb, as targets are chosen from. */
export interface TargetCandidate {
  name: string;
  /** The module that multiplies by it, from its MatMul node's name (`layers.0.self_attn.q_proj`), if named. */
  module?: string;
  /** A 2-D matmul weight that is neither the embedding table nor the LM head: what `all-linear` takes. */
  linear: boolean;
  /**
   * Names of the LM head this tensor also serves when the head is tied to it (the exporter's copy the loader
   * dropped): the head is one tensor with its source, targeted iff the source is, so patterns never match these.
   */
  tiedHead?: string[];
}

/** True when the targets are every tensor the mode perturbs: today's behaviour, recorded nowhere. */
export function targetsAll(t: Targets): boolean {
  return t === 'all' || (typeof t === 'object' && t.include === 'all' && t.exclude.length === 0);
}

/** Whether `pattern` matches the tensor `name` (the rule in the file comment). */
export function patternMatches(pattern: string, name: string): boolean {
  if (!SEGMENT_LIST.test(pattern)) return searchLinear(pattern, name);
  const segments = name.split('.');
  return pattern.split(',').some((s) => segments.includes(s));
}

function matchesCandidate(pattern: string, c: TargetCandidate): boolean {
  return patternMatches(pattern, c.name) || (c.module !== undefined && patternMatches(pattern, c.module));
}

function few(names: readonly string[]): string {
  const shown = names.slice(0, 6).join(', ');
  return names.length > 6 ? `${shown}, … (${names.length} in all)` : shown;
}

/**
 * The targeted candidates' indices, ascending. Throws, naming the field and a few of the tensors, when a
 * pattern matches no candidate or nothing is left to perturb: a typo must not train nothing, or everything.
 * `what` says whose tensors these are ("full mode's tensors").
 */
export function selectTargets(t: Targets, candidates: readonly TargetCandidate[], what: string): number[] {
  const all = candidates.map((_, i) => i);
  if (t === 'all') return all;
  const names = candidates.map((c) => (c.module && !c.name.includes(c.module) ? `${c.name} (${c.module})` : c.name));
  const linear = all.filter((i) => candidates[i].linear);
  if (t === 'all-linear' || (typeof t === 'object' && t.include === 'all-linear')) {
    if (linear.length === 0) throw new Error(`targets: "all-linear" finds no 2-D matmul weight besides the embedding and the LM head among ${what}: ${few(names)}`);
  }
  if (t === 'all-linear') return linear;
  const matching = (field: 'include' | 'exclude', patterns: readonly string[]): Set<number> => {
    const hit = new Set<number>();
    patterns.forEach((p, k) => {
      const found = all.filter((i) => matchesCandidate(p, candidates[i]));
      if (found.length === 0) {
        const tied = candidates.find((c) => c.tiedHead?.some((h) => patternMatches(p, h)));
        const why = tied ? `: the LM head is tied to "${tied.name}" and is one tensor with it, targeted iff "${tied.name}" is` : '';
        throw new Error(`targets.${field}[${k}]: "${p}" matches none of ${what}${why}: ${few(names)}`);
      }
      for (const i of found) hit.add(i);
    });
    return hit;
  };
  const included = t.include === 'all' ? new Set(all) : t.include === 'all-linear' ? new Set(linear) : matching('include', t.include);
  const excluded = matching('exclude', t.exclude);
  const chosen = all.filter((i) => included.has(i) && !excluded.has(i));
  if (chosen.length === 0) {
    throw new Error(`targets: include ${JSON.stringify(t.include)} less exclude ${JSON.stringify(t.exclude)} leaves none of ${what} to perturb: ${few(names)}`);
  }
  return chosen;
}
