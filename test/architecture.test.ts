/**
 * The structure's rules, read from docs/architecture.json (their one statement), held against the import
 * graph of trainer/, functions/, environments/ and shared/ (static, dynamic and type-only imports alike):
 * no circle between files or rooms, every room imports only rooms below it, the engine's layers each import
 * only layers below, no forbidden arrow, each builder called only in its own room and the composition root,
 * esopt processes started in one file. docs/ARCHITECTURE.md shows the same rules; its copy is checked here.
 * Each check is first run on a planted graph or source, so a check that can no longer fail is caught too.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { z } from 'zod';
import { describe, expect, it } from 'vitest';

type ImportGraph = Map<string, string[]>;

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

const Rules = z
  .object({
    about: z.string(),
    order: z.array(z.object({ rooms: z.array(z.string().regex(/^[a-z/-]+$/)).min(1), holds: z.string() }).strict()).min(2),
    orderRule: z.string(),
    engineLayers: z.object({
      about: z.string(),
      outside: z.array(z.string()),
      layers: z.array(z.object({ layer: z.number().int().min(0), prefix: z.string(), holds: z.string() }).strict()),
    }),
    builders: z.object({ about: z.string(), rules: z.array(z.object({ what: z.string(), names: z.array(z.string()).min(1), in: z.array(z.string()).min(1) }).strict()) }),
    forbidden: z.array(z.object({ from: z.string(), to: z.string(), why: z.string() }).strict()),
    processLaunch: z.object({ about: z.string(), file: z.string() }),
  })
  .strict();
type Rules = z.infer<typeof Rules>;

const RULES: Rules = Rules.parse(JSON.parse(readFileSync(join(ROOT, 'docs/architecture.json'), 'utf8')));
const TOP_FOLDERS = ['trainer', 'functions', 'environments', 'shared'];

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

/** The rooms of `rules`, each with its place in the order (0 = the top). */
const roomLevels = (rules: Rules) => new Map(rules.order.flatMap((o, level) => o.rooms.map((room) => [room, level] as const)));

/** The room a file belongs to: the longest room path that starts it (undefined: in none). */
function roomOf(rules: Rules, file: string): string | undefined {
  return [...roomLevels(rules).keys()].filter((r) => file.startsWith(`${r}/`)).sort((a, b) => b.length - a.length)[0];
}

/** The graph between rooms; a file in no room stays its own node. */
function roomGraph(rules: Rules, graph: ImportGraph): ImportGraph {
  const node = (f: string) => roomOf(rules, f) ?? f;
  const out: ImportGraph = new Map();
  for (const [file, targets] of graph) {
    const from = node(file);
    const edges = new Set(out.get(from) ?? []);
    for (const t of targets) if (node(t) !== from) edges.add(node(t));
    out.set(from, [...edges]);
  }
  return out;
}

/** Every source file must lie in a room, so that no folder escapes the order. */
const roomless = (rules: Rules, files: string[]) => files.filter((f) => roomOf(rules, f) === undefined);

/** Imports between rooms that go up the order, or sideways between rooms on one line. */
function arrowsAgainstOrder(rules: Rules, graph: ImportGraph): string[] {
  const levels = roomLevels(rules);
  return [...graph].flatMap(([file, targets]) => {
    const from = roomOf(rules, file);
    if (from === undefined) return [];
    return targets
      .filter((t) => {
        const to = roomOf(rules, t);
        return to !== undefined && to !== from && levels.get(to)! <= levels.get(from)!;
      })
      .map((t) => `${file} → ${t}`);
  });
}

/** The engine's layer of a file: -1 for shared/ (below every layer), undefined outside the engine's layers. */
function engineLayer(rules: Rules, file: string): number | undefined {
  if (file.startsWith('shared/')) return -1;
  if (rules.engineLayers.outside.includes(file)) return undefined;
  return rules.engineLayers.layers.find((l) => file.startsWith(l.prefix))?.layer;
}

/** Imports from a file of the engine's layers to a file placed higher (a file outside every layer counts as highest). */
function layerArrowsUp(rules: Rules, graph: ImportGraph): string[] {
  return [...graph].flatMap(([file, targets]) => {
    const r = engineLayer(rules, file);
    if (r === undefined || r < 0) return [];
    return targets.filter((t) => (engineLayer(rules, t) ?? Infinity) > r).map((t) => `${file} → ${t}`);
  });
}

function forbiddenArrows(rules: Rules, graph: ImportGraph): string[] {
  return [...graph].flatMap(([file, targets]) =>
    rules.forbidden.flatMap((f) => (new RegExp(f.from).test(file) ? targets.filter((t) => new RegExp(f.to).test(t)).map((t) => `${file} → ${t} (${f.why})`) : [])),
  );
}

/** The names a source calls or constructs (`name(…)`, `new Name(…)`), from its syntax tree: comments and strings never count. */
function calledNames(source: string): Set<string> {
  const names = new Set<string>();
  const visit = (node: ts.Node) => {
    if ((ts.isCallExpression(node) || ts.isNewExpression(node)) && ts.isIdentifier(node.expression)) names.add(node.expression.text);
    ts.forEachChild(node, visit);
  };
  visit(ts.createSourceFile('x.ts', source, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS));
  return names;
}

/** Each file that calls a builder outside the rooms the rules give it. */
function buildersOutOfPlace(rules: Rules, sources: Map<string, string>): string[] {
  return [...sources].flatMap(([file, source]) => {
    const called = calledNames(source);
    return rules.builders.rules.flatMap((b) =>
      b.in.some((room) => file.startsWith(room)) ? [] : b.names.filter((n) => called.has(n)).map((n) => `${file} calls ${n} (${b.what} come from trainer/assembly/)`),
    );
  });
}

/** Source that resolves the CLI's entry point as a path to run (a URL or a join), not a mere mention. */
const cliLaunchIn = (source: string) => /new URL\(\s*['"`][./]*(?:trainer\/)?cli\/bin\.js['"`]\s*,\s*import\.meta\.url|join\([^)]*['"`][^'"`]*cli\/bin\.js['"`]\s*\)/.test(source);
const cliLaunches = (files: string[]) => files.filter((f) => f.startsWith('trainer/') && f.endsWith('.ts') && cliLaunchIn(readFileSync(join(ROOT, f), 'utf8'))).sort();

/** The rules as docs/ARCHITECTURE.md shows them, between its two markers. */
function renderRules(rules: Rules): string {
  const rows = (cells: string[][]) => cells.map((c) => `| ${c.join(' | ')} |`).join('\n');
  const code = (s: string) => `\`${s}\``;
  return [
    `**The order, top to bottom.** ${rules.orderRule}`,
    '',
    rows([['level', 'rooms', 'hold'], ['---', '---', '---'], ...rules.order.map((o, i) => [String(i + 1), o.rooms.map((r) => code(`${r}/`)).join(', '), o.holds])]),
    '',
    `**Inside the engine.** ${rules.engineLayers.about} Outside: ${rules.engineLayers.outside.map(code).join(', ')}.`,
    '',
    rows([['layer', 'files', 'hold'], ['---', '---', '---'], ...rules.engineLayers.layers.map((l) => [String(l.layer), code(l.prefix), l.holds])]),
    '',
    `**Builders.** ${rules.builders.about}`,
    '',
    rows([['builds', 'names', 'called only in'], ['---', '---', '---'], ...rules.builders.rules.map((b) => [b.what, b.names.map(code).join(', '), b.in.map(code).join(', ')])]),
    '',
    '**Forbidden arrows**, whatever the order allows:',
    '',
    rows([['from (files matching)', 'to (files matching)', 'why'], ['---', '---', '---'], ...rules.forbidden.map((f) => [code(f.from), code(f.to.replace(/\|/g, '\\|')), f.why])]),
    '',
    `**Processes.** ${rules.processLaunch.about} ${code(rules.processLaunch.file)}.`,
  ].join('\n');
}

const BEGIN = '<!-- rules: generated from docs/architecture.json; test/architecture.test.ts checks this copy -->';
const END = '<!-- rules end -->';

/** A small set of rules for the checks' own tests. */
const PLANTED_RULES: Rules = {
  ...RULES,
  order: [
    { rooms: ['trainer/cli'], holds: '' },
    { rooms: ['trainer/assembly'], holds: '' },
    { rooms: ['trainer/serving', 'trainer/fanout'], holds: '' },
    { rooms: ['trainer/engine'], holds: '' },
    { rooms: ['shared'], holds: '' },
  ],
};

describe('the checks themselves', () => {
  it('find a circle between files, and between rooms where the files make none', () => {
    const files: ImportGraph = new Map([
      ['shared/a.ts', ['shared/b.ts']],
      ['shared/b.ts', ['shared/c.ts']],
      ['shared/c.ts', ['shared/a.ts']],
    ]);
    expect(circles(files)).toEqual([['shared/a.ts', 'shared/b.ts', 'shared/c.ts']]);
    const rooms: ImportGraph = new Map([
      ['trainer/serving/a.ts', ['trainer/engine/b.ts']],
      ['trainer/engine/b.ts', ['trainer/serving/c.ts']],
      ['trainer/serving/c.ts', []],
    ]);
    expect(circles(rooms)).toEqual([]);
    expect(circles(roomGraph(PLANTED_RULES, rooms))).toEqual([['trainer/engine', 'trainer/serving']]);
  });

  it('place a file in the longest room that starts it, and find arrows up the order and sideways', () => {
    const rules: Rules = { ...PLANTED_RULES, order: [...PLANTED_RULES.order, { rooms: ['trainer/engine/members'], holds: '' }] };
    expect(roomOf(rules, 'trainer/engine/members/lora.ts')).toBe('trainer/engine/members');
    expect(roomOf(rules, 'trainer/engine/model/weights.ts')).toBe('trainer/engine');
    expect(roomless(PLANTED_RULES, ['trainer/studies/demo/demo.ts', 'shared/es.ts'])).toEqual(['trainer/studies/demo/demo.ts']);
    const planted: ImportGraph = new Map([
      ['trainer/cli/main.ts', ['trainer/assembly/run.ts', 'shared/es.ts']],
      ['trainer/engine/engine.ts', ['trainer/assembly/run.ts']],
      ['trainer/serving/app.ts', ['trainer/fanout/local.ts', 'trainer/engine/engine.ts']],
    ]);
    expect(arrowsAgainstOrder(PLANTED_RULES, planted)).toEqual(['trainer/engine/engine.ts → trainer/assembly/run.ts', 'trainer/serving/app.ts → trainer/fanout/local.ts']);
  });

  it("place the engine's layers by the first matching prefix, and find an arrow up", () => {
    expect(engineLayer(RULES, 'trainer/engine/members/lowrank.ts')).toBe(5);
    expect(engineLayer(RULES, 'trainer/engine/model/weights.ts')).toBe(3);
    expect(engineLayer(RULES, 'shared/es.ts')).toBe(-1);
    expect(engineLayer(RULES, 'trainer/engine/model/model-policy.ts')).toBeUndefined();
    expect(engineLayer(RULES, 'trainer/training/loop/training.ts')).toBeUndefined();
    expect(layerArrowsUp(RULES, new Map([['trainer/engine/onnx/proto.ts', ['trainer/engine/model/weights.ts', 'shared/es.ts']]]))).toEqual(['trainer/engine/onnx/proto.ts → trainer/engine/model/weights.ts']);
  });

  it('find each forbidden arrow: the loop reaching a server or a fan-out adapter, the loop entered past its face', () => {
    const planted: ImportGraph = new Map([
      ['trainer/training/loop/training.ts', ['trainer/serving/server.ts', 'trainer/fanout/local.ts', 'trainer/fanout/iteration-requests.ts', 'trainer/training/loop/iteration.ts']],
      ['trainer/studies/demo/random-search.ts', ['trainer/training/loop/collect.ts', 'trainer/training/loop/index.ts']],
    ]);
    expect(forbiddenArrows(RULES, planted).map((a) => a.split(' (')[0])).toEqual([
      'trainer/training/loop/training.ts → trainer/serving/server.ts',
      'trainer/training/loop/training.ts → trainer/fanout/local.ts',
      'trainer/studies/demo/random-search.ts → trainer/training/loop/collect.ts',
    ]);
  });

  it('find a builder called past the root, by call or by new, never by a mention in a comment or a string', () => {
    const planted = new Map([
      ['trainer/studies/bench/x.ts', "import { createEngine } from '../../engine/model/create-engine.ts';\nconst e = await createEngine({ model });\nconst s = new FsObjectStore(dir);"],
      ['trainer/cli/commands/y.ts', "// createEngine( is not called here\nconst note = 'new LocalFanout(';\nawait train({ run });"],
      ['trainer/assembly/engine.ts', 'export const openEngine = (o) => createEngine(o);'],
      ['trainer/engine/model/create-engine.ts', 'export function createOnnxEngine() { return new OnnxEngine(); }\ncreateOnnxEngine();'],
    ]);
    expect(buildersOutOfPlace(RULES, planted).map((a) => a.split(' (')[0])).toEqual([
      'trainer/studies/bench/x.ts calls createEngine',
      'trainer/studies/bench/x.ts calls FsObjectStore',
      'trainer/cli/commands/y.ts calls train',
    ]);
  });
});

describe('the code', () => {
  const graph = readImportGraph(TOP_FOLDERS);
  const files = [...graph.keys()];

  it('is read from every folder, through type-only and dynamic imports', () => {
    expect(graph.get('trainer/engine/model/create-engine.ts')).toContain('trainer/engine/model/onnx-engine.ts');
    expect(graph.get('trainer/engine/members/member-weights.ts')).toContain('trainer/engine/engine.ts'); // import type
    expect(TOP_FOLDERS.every((top) => files.some((f) => f.startsWith(`${top}/`)))).toBe(true);
    expect(graph.size).toBeGreaterThan(200);
  });

  it('lies in rooms, every source file in one', () => {
    expect(roomless(RULES, files)).toEqual([]);
    for (const o of RULES.order) for (const room of o.rooms) expect(existsSync(join(ROOT, room)), room).toBe(true);
  });

  it('has no circle between files', () => {
    expect(circles(graph)).toEqual([]);
  });

  it('has no circle between rooms', () => {
    expect(circles(roomGraph(RULES, graph))).toEqual([]);
  });

  it('imports only rooms below (docs/architecture.json, order)', () => {
    expect(arrowsAgainstOrder(RULES, graph)).toEqual([]);
  });

  it("keeps the engine's layers: each imports only from those below it", () => {
    expect(layerArrowsUp(RULES, graph)).toEqual([]);
  });

  it('draws no forbidden arrow', () => {
    expect(forbiddenArrows(RULES, graph)).toEqual([]);
  });

  it('calls each builder only in its own room and the composition root', () => {
    expect(buildersOutOfPlace(RULES, new Map(files.map((f) => [f, readFileSync(join(ROOT, f), 'utf8')])))).toEqual([]);
  });

  it('starts esopt processes in one place, never by the path of the CLI elsewhere', () => {
    expect(cliLaunches(files)).toEqual([RULES.processLaunch.file]);
    // the check finds a planted launch
    expect(cliLaunchIn("const BIN = fileURLToPath(new URL('../cli/bin.js', import.meta.url));")).toBe(true);
    expect(cliLaunchIn("spawn(process.execPath, [join(root, 'trainer/cli/bin.js'), 'replica'])")).toBe(true);
    expect(cliLaunchIn("const REQUIRED = ['package.json', 'trainer/cli/bin.js'];")).toBe(false);
  });

  it('is shown as it is in docs/ARCHITECTURE.md', () => {
    const page = readFileSync(join(ROOT, 'docs/ARCHITECTURE.md'), 'utf8');
    const start = page.indexOf(BEGIN);
    const end = page.indexOf(END);
    expect(start, `docs/ARCHITECTURE.md lacks the line ${BEGIN}`).toBeGreaterThan(-1);
    const shown = page.slice(start + BEGIN.length, end).trim();
    expect(shown, 'docs/ARCHITECTURE.md shows other rules than docs/architecture.json: paste the expected text between its markers').toBe(renderRules(RULES));
  });
});
