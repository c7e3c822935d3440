/**
 * The import graph of trainer/, functions/, environments/ and shared/ (static, dynamic and type-only
 * imports alike) keeps the project's order: no circle between files or between folders, the top folders
 * point toward shared/ (trainer → functions → environments → shared), and the model runtime's layers
 * (docs/MODEL.md, the first comment of trainer/engine/model/onnx-engine.ts) each import only from layers below.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

type ImportGraph = Map<string, string[]>;

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const TOP_FOLDERS = ['shared', 'environments', 'functions', 'trainer']; // each may import only from those before it

/** The model runtime's layers, lowest first; a file takes the first prefix it matches, later entries are lower. */
const RUNTIME_LAYERS: Array<{ layer: number; prefix: string }> = [
  { layer: Infinity, prefix: 'trainer/engine/model/model-policy.ts' }, // users of the runtime, not part of it
  { layer: 7, prefix: 'trainer/engine/model/create-engine.ts' },
  { layer: 6, prefix: 'trainer/engine/model/onnx-engine.ts' },
  { layer: 5, prefix: 'trainer/engine/members/' },
  { layer: 4, prefix: 'trainer/engine/model/sessions.ts' },
  { layer: 4, prefix: 'trainer/engine/model/ort-format.ts' },
  { layer: 3, prefix: 'trainer/engine/model/' }, // the model and θ: export directories, the decoder, weights, tokenizers
  { layer: 2, prefix: 'trainer/engine/perturbation/' },
  { layer: 2, prefix: 'trainer/engine/generation/' },
  { layer: 1, prefix: 'trainer/engine/onnx/' },
  { layer: 0, prefix: 'trainer/engine/engine.ts' },
];

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((name) => {
    const path = `${dir}/${name}`;
    if (name === 'node_modules') return [];
    if (statSync(join(ROOT, path)).isDirectory()) return sourceFiles(path);
    return /\.(ts|js|mjs)$/.test(name) && !name.endsWith('.d.ts') ? [path] : [];
  });
}

/** A relative specifier as a path from the repository root, or null when it names no source file. */
function resolveSpecifier(from: string, specifier: string): string | null {
  const base = relative(ROOT, resolve(ROOT, dirname(from), specifier));
  const candidates = [base, base.replace(/\.js$/, '.ts'), `${base}.ts`, `${base}/index.ts`];
  return candidates.find((c) => /\.(ts|js|mjs)$/.test(c) && existsSync(join(ROOT, c))) ?? null;
}

function readImportGraph(folders: string[]): ImportGraph {
  const graph: ImportGraph = new Map();
  for (const file of folders.flatMap(sourceFiles)) {
    const { importedFiles } = ts.preProcessFile(readFileSync(join(ROOT, file), 'utf8'), true, true);
    const targets = importedFiles.filter((i) => i.fileName.startsWith('.')).map((i) => resolveSpecifier(file, i.fileName));
    graph.set(file, [...new Set(targets.filter((t): t is string => t !== null))]);
  }
  return graph;
}

/** The graph's strongly connected components of more than one node (Tarjan), each sorted. */
function circles(graph: ImportGraph): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1) found.push(component.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

/** The graph between folders: a file's node is its folder two levels down (trainer/engine/model), or itself above that. */
function folderGraph(graph: ImportGraph): ImportGraph {
  const folder = (f: string) => (f.split('/').length > 2 ? f.split('/').slice(0, 2).join('/') : f);
  const out: ImportGraph = new Map();
  for (const [file, targets] of graph) {
    const from = folder(file);
    const edges = new Set(out.get(from) ?? []);
    for (const t of targets) if (folder(t) !== from) edges.add(folder(t));
    out.set(from, [...edges]);
  }
  return out;
}

/**
 * Every import `file → target` that goes up an order: `rank` places a file (undefined: outside the order);
 * a placed file may import only files placed at its rank or below.
 */
function arrowsUp(graph: ImportGraph, rank: (file: string) => number | undefined): string[] {
  return [...graph].flatMap(([file, targets]) => {
    const r = rank(file);
    if (r === undefined) return [];
    return targets.filter((t) => (rank(t) ?? Infinity) > r).map((t) => `${file} → ${t}`);
  });
}

/**
 * Arrows no file may draw, whatever the layering: the ES loop is given its engine, server and target by the
 * composition root (trainer/assembly/) and builds none of them; only the root and the commands import the root.
 */
const FORBIDDEN: Array<{ from: RegExp; to: RegExp; why: string }> = [
  { from: /^trainer\/loop\//, to: /^trainer\/(server\/|model\/create-engine\.ts|compose\/|hosting\/|fanout\/(local|cloud)-target\.ts)/, why: 'the loop is handed its engine, server and target' },
  { from: /^(shared|functions|environments)\/|^trainer\/(loop|model|generation|perturbation|onnx|server|fanout)\//, to: /^trainer\/compose\//, why: 'only entry points use the composition root' },
  // Engines too: commands, benchmarks and hosts get theirs from the root (assembly/engine.ts).
  { from: /^(?!trainer\/(model|compose)\/)/, to: /^trainer\/model\/create-engine\.ts$/, why: 'engines come from the composition root' },
  // A run's target is chosen by the root (assembly/wirings.ts: embeddedTarget, cloudTarget).
  { from: /^(?!trainer\/(compose|fanout)\/)/, to: /^trainer\/fanout\/local-target\.ts$/, why: 'targets come from the composition root' },
  // Outside the loop, its public face (training/loop/index.ts): not its steps, its collector or its classification.
  { from: /^(?!trainer\/loop\/)/, to: /^trainer\/loop\/(?!index\.ts$)/, why: "the loop's public face is training/loop/index.ts" },
];

/** Source that resolves the CLI's entry point as a path to run (a URL or a join), not a mere mention. */
const cliLaunchIn = (source: string) => /new URL\(\s*['"`][./]*(?:trainer\/)?cli\/bin\.js['"`]\s*,\s*import\.meta\.url|join\([^)]*['"`][^'"`]*cli\/bin\.js['"`]\s*\)/.test(source);
const cliLaunches = (files: string[]) => files.filter((f) => f.startsWith('trainer/') && f.endsWith('.ts') && cliLaunchIn(readFileSync(join(ROOT, f), 'utf8'))).sort();

function forbiddenArrows(graph: ImportGraph): string[] {
  return [...graph].flatMap(([file, targets]) => FORBIDDEN.flatMap((f) => (f.from.test(file) ? targets.filter((t) => f.to.test(t)).map((t) => `${file} → ${t} (${f.why})`) : [])));
}

const topRank = (file: string) => {
  const i = TOP_FOLDERS.indexOf(file.split('/')[0]);
  return i < 0 ? undefined : i;
};
const runtimeLayer = (file: string) => RUNTIME_LAYERS.find((l) => file.startsWith(l.prefix))?.layer;
/** shared/ lies below every layer of the runtime; the runtime's users and the rest of trainer/ lie outside it. */
const runtimeRank = (file: string) => {
  if (file.startsWith('shared/')) return -1;
  const layer = runtimeLayer(file);
  return layer === Infinity ? undefined : layer;
};

describe('the checks themselves', () => {
  it('find a circle between files, and an arrow up', () => {
    const g: ImportGraph = new Map([
      ['shared/a.ts', ['shared/b.ts']],
      ['shared/b.ts', ['trainer/c.ts']],
      ['trainer/c.ts', ['shared/a.ts']],
      ['trainer/d.ts', ['shared/a.ts']],
    ]);
    expect(circles(g)).toEqual([['shared/a.ts', 'shared/b.ts', 'trainer/c.ts']]);
    expect(arrowsUp(g, topRank)).toEqual(['shared/b.ts → trainer/c.ts']);
  });
  it('find a circle between folders where the files make none', () => {
    const g: ImportGraph = new Map([
      ['trainer/x/a.ts', ['trainer/y/b.ts']],
      ['trainer/y/b.ts', ['trainer/x/c.ts']],
      ['trainer/x/c.ts', []],
    ]);
    expect(circles(g)).toEqual([]);
    expect(circles(folderGraph(g))).toEqual([['trainer/x', 'trainer/y']]);
  });
  it('place the runtime layers by the first matching prefix', () => {
    expect(runtimeRank('trainer/engine/members/lowrank.ts')).toBe(5);
    expect(runtimeRank('trainer/engine/model/weights.ts')).toBe(3);
    expect(runtimeRank('shared/es.ts')).toBe(-1);
    expect(runtimeRank('trainer/engine/model/model-policy.ts')).toBeUndefined();
    expect(runtimeRank('trainer/training/loop/training.ts')).toBeUndefined();
    expect(arrowsUp(new Map([['trainer/engine/onnx/proto.ts', ['trainer/engine/model/weights.ts', 'shared/es.ts']]]), runtimeRank)).toEqual(['trainer/engine/onnx/proto.ts → trainer/engine/model/weights.ts']);
  });
  it('find each forbidden arrow: the loop building its server or engine, the runtime reaching the root, an engine built past the root', () => {
    const planted: ImportGraph = new Map([
      ['trainer/training/loop/training.ts', ['trainer/serving/server.ts', 'trainer/engine/model/create-engine.ts', 'trainer/training/loop/iteration.ts', 'trainer/engine/engine.ts']],
      ['trainer/training/loop/iteration.ts', ['trainer/assembly/run.ts', 'trainer/assembly/local-site.ts', 'trainer/assembly/site.ts']],
      ['trainer/engine/model/onnx-engine.ts', ['trainer/assembly/wirings.ts']],
      ['trainer/cli/commands/train.ts', ['trainer/assembly/run.ts', 'trainer/serving/server.ts']],
      ['trainer/studies/demo/random-search.ts', ['trainer/training/loop/collect.ts', 'trainer/training/loop/index.ts']],
      ['trainer/studies/grpo/grpo.ts', ['trainer/assembly/local-site.ts', 'trainer/assembly/wirings.ts']],
      ['trainer/studies/bench/full.ts', ['trainer/engine/model/create-engine.ts', 'trainer/assembly/engine.ts']],
    ]);
    expect(forbiddenArrows(planted).map((a) => a.split(' (')[0])).toEqual([
      'trainer/training/loop/training.ts → trainer/serving/server.ts',
      'trainer/training/loop/training.ts → trainer/engine/model/create-engine.ts',
      'trainer/training/loop/training.ts → trainer/engine/model/create-engine.ts',
      'trainer/training/loop/iteration.ts → trainer/assembly/run.ts',
      'trainer/training/loop/iteration.ts → trainer/assembly/local-site.ts',
      'trainer/training/loop/iteration.ts → trainer/assembly/run.ts',
      'trainer/training/loop/iteration.ts → trainer/assembly/local-site.ts',
      'trainer/engine/model/onnx-engine.ts → trainer/assembly/wirings.ts',
      'trainer/studies/demo/random-search.ts → trainer/training/loop/collect.ts',
      'trainer/studies/grpo/grpo.ts → trainer/assembly/local-site.ts',
      'trainer/studies/bench/full.ts → trainer/engine/model/create-engine.ts',
    ]);
  });
});

describe('the import graph', () => {
  const graph = readImportGraph(TOP_FOLDERS);

  it('is read from every folder, through type-only and dynamic imports', () => {
    expect(graph.get('trainer/engine/model/create-engine.ts')).toContain('trainer/engine/model/onnx-engine.ts');
    expect(graph.get('trainer/engine/members/member-weights.ts')).toContain('trainer/engine/engine.ts'); // import type
    expect(TOP_FOLDERS.every((top) => [...graph.keys()].some((f) => f.startsWith(`${top}/`)))).toBe(true);
    expect(graph.size).toBeGreaterThan(200);
  });

  it('has no circle between files', () => {
    expect(circles(graph)).toEqual([]);
  });

  it('has no circle between folders', () => {
    expect(circles(folderGraph(graph))).toEqual([]);
  });

  it('points toward shared/: trainer → functions → environments → shared', () => {
    expect(arrowsUp(graph, topRank)).toEqual([]);
  });

  it("keeps the model runtime's layers: each imports only from those below it", () => {
    expect(arrowsUp(graph, runtimeRank)).toEqual([]);
  });

  it('draws no forbidden arrow: the loop builds no engine, server or target; only entry points use the root', () => {
    expect(forbiddenArrows(graph)).toEqual([]);
  });

  it('starts esopt processes in one place (assembly/esopt-process.ts), never by the path of the CLI elsewhere', () => {
    expect(cliLaunches([...graph.keys()])).toEqual(['trainer/assembly/esopt-process.ts']);
    // the check finds a planted launch
    expect(cliLaunchIn("const BIN = fileURLToPath(new URL('../cli/bin.js', import.meta.url));")).toBe(true);
    expect(cliLaunchIn("spawn(process.execPath, [join(root, 'trainer/cli/bin.js'), 'replica'])")).toBe(true);
    expect(cliLaunchIn("const REQUIRED = ['package.json', 'trainer/cli/bin.js'];")).toBe(false);
  });
});
