/**
 * The source folders' import graph: arrows point toward shared/ (trainer → functions → environments →
 * shared), no two files import each other through a circle, and no two folders inside a top folder do.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
/** Lowest first: a file may import from its own folder and the folders before it. */
const LAYERS = ['shared', 'environments', 'functions', 'trainer'];

/**
 * Circles that exist and have an owner removing them (issue 24: the benchmarks get their own list); any
 * other circle fails.
 */
const KNOWN_CIRCLES = [['trainer/cli/commands/bench-all.ts', 'trainer/cli/registry.ts']];

type Graph = Map<string, string[]>;

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory()) return e.name === 'node_modules' ? [] : sourceFiles(path);
    return /\.(ts|mts|js|mjs)$/.test(e.name) && !e.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** Each source file → the project files it imports (static, type-only, re-exports and import()). */
function importGraph(): Graph {
  const graph: Graph = new Map();
  for (const file of LAYERS.flatMap(sourceFiles)) {
    const { importedFiles } = ts.preProcessFile(readFileSync(join(ROOT, file), 'utf8'), true, true);
    const targets = importedFiles.map((f) => f.fileName).filter((s) => s.startsWith('.'));
    graph.set(file, [...new Set(targets.map((s) => relative(ROOT, resolve(ROOT, dirname(file), s))))]);
  }
  return graph;
}

/** The graph's circles: strongly connected components of two or more nodes, each sorted (Tarjan). */
function circles(graph: Graph): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
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

/** The graph between the folders one level inside each top folder (a top folder's own files are one node each). */
function folderGraph(graph: Graph): Graph {
  const node = (file: string) => file.split('/').slice(0, 2).join('/');
  const folders: Graph = new Map();
  for (const [file, targets] of graph) {
    const from = node(file);
    const to = new Set(folders.get(from) ?? []);
    for (const t of targets) if (node(t) !== from && t.split('/')[0] === from.split('/')[0]) to.add(node(t));
    folders.set(from, [...to]);
  }
  for (const targets of folders.values()) for (const t of targets) if (!folders.has(t)) folders.set(t, []);
  return folders;
}

const graph = importGraph();

describe('architecture', () => {
  it('reads the import graph (the circle finder and the parser see what they should)', () => {
    expect(circles(new Map([['a', ['b']], ['b', ['c']], ['c', ['a']], ['d', ['a']]]))).toEqual([['a', 'b', 'c']]);
    expect(graph.get('trainer/model/create-engine.ts')).toContain('trainer/model/onnx-engine.ts');
    expect(graph.get('trainer/model/onnx-engine.ts')).toContain('trainer/engine.ts'); // a type-only import
    expect(graph.size).toBeGreaterThan(200);
  });

  it('points every import toward shared/: trainer → functions → environments → shared', () => {
    const layer = (file: string) => LAYERS.indexOf(file.split('/')[0]);
    const back = [...graph].flatMap(([file, targets]) => targets.filter((t) => layer(t) > layer(file)).map((t) => `${file} → ${t}`));
    expect(back).toEqual([]);
  });

  it('has no import circle between files', () => {
    const known = new Set(KNOWN_CIRCLES.map((c) => [...c].sort().join(' ')));
    expect(circles(graph).filter((c) => !known.has(c.join(' ')))).toEqual([]);
  });

  it('has no import circle between the folders inside trainer/, functions/, environments/ and shared/', () => {
    expect(circles(folderGraph(graph))).toEqual([]);
  });
});
