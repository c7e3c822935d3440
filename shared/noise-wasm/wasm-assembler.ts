/**
 * A small WebAssembly binary assembler: just enough of the format (types, function imports, one
 * exported memory, functions, exports, code) and of the instruction set (scalar and SIMD128) for the
 * noise kernel (one file past 300 lines: the opcode table and the encoder that reads it belong together).
 * The kernel is built from TypeScript at load time, so no binary is committed and the
 * source of every byte is readable code.
 *
 * Instructions are written in WebAssembly's own mnemonics (`f.op('i32.add')`), locals and labels by
 * name; the assembler resolves names to indices and branch depths.
 */

export type ValType = 'i32' | 'i64' | 'f32' | 'f64' | 'v128';

const VALTYPE: Record<ValType, number> = { i32: 0x7f, i64: 0x7e, f32: 0x7d, f64: 0x7c, v128: 0x7b };

/** Opcodes without immediates. A number is a one-byte opcode; [0xfd, n] is a SIMD opcode (n in LEB128). */
const PLAIN = {
  unreachable: 0x00,
  return: 0x0f,
  drop: 0x1a,
  select: 0x1b,
  'i32.eqz': 0x45,
  'i32.eq': 0x46,
  'i32.ne': 0x47,
  'i32.lt_s': 0x48,
  'i32.lt_u': 0x49,
  'i32.gt_s': 0x4a,
  'i32.gt_u': 0x4b,
  'i32.le_s': 0x4c,
  'i32.ge_s': 0x4e,
  'i32.ge_u': 0x4f,
  'f64.eq': 0x61,
  'f64.lt': 0x63,
  'f64.gt': 0x64,
  'f64.le': 0x65,
  'f64.ge': 0x66,
  'i32.ctz': 0x68,
  'i32.add': 0x6a,
  'i32.sub': 0x6b,
  'i32.mul': 0x6c,
  'i32.and': 0x71,
  'i32.or': 0x72,
  'i32.xor': 0x73,
  'i32.shl': 0x74,
  'i32.shr_s': 0x75,
  'i32.shr_u': 0x76,
  'i32.rotl': 0x77,
  'f64.abs': 0x99,
  'f64.neg': 0x9a,
  'f64.nearest': 0x9e,
  'f64.add': 0xa0,
  'f64.sub': 0xa1,
  'f64.mul': 0xa2,
  'f64.div': 0xa3,
  'i32.trunc_f64_s': 0xaa,
  'f32.demote_f64': 0xb6,
  'f64.convert_i32_s': 0xb7,
  'f64.convert_i32_u': 0xb8,
  'f64.promote_f32': 0xbb,
  'i32.reinterpret_f32': 0xbc,
  'f32.reinterpret_i32': 0xbe,
  'i8x16.swizzle': [0xfd, 0x0e],
  'i32x4.splat': [0xfd, 0x11],
  'f64x2.splat': [0xfd, 0x14],
  'i32x4.eq': [0xfd, 0x37],
  'i32x4.lt_s': [0xfd, 0x39],
  'i32x4.gt_s': [0xfd, 0x3b],
  'f32x4.eq': [0xfd, 0x41],
  'f64x2.lt': [0xfd, 0x49],
  'v128.not': [0xfd, 0x4d],
  'v128.and': [0xfd, 0x4e],
  'v128.andnot': [0xfd, 0x4f],
  'v128.or': [0xfd, 0x50],
  'v128.xor': [0xfd, 0x51],
  'v128.bitselect': [0xfd, 0x52],
  'v128.any_true': [0xfd, 0x53],
  'f32x4.demote_f64x2_zero': [0xfd, 0x5e],
  'f64x2.promote_low_f32x4': [0xfd, 0x5f],
  'i32x4.abs': [0xfd, 0xa0],
  'i32x4.all_true': [0xfd, 0xa3],
  'i32x4.bitmask': [0xfd, 0xa4],
  'i32x4.shl': [0xfd, 0xab],
  'i32x4.shr_s': [0xfd, 0xac],
  'i32x4.shr_u': [0xfd, 0xad],
  'i32x4.add': [0xfd, 0xae],
  'i32x4.sub': [0xfd, 0xb1],
  'i32x4.mul': [0xfd, 0xb5],
  'f64x2.abs': [0xfd, 0xec],
  'f64x2.add': [0xfd, 0xf0],
  'f64x2.sub': [0xfd, 0xf1],
  'f64x2.mul': [0xfd, 0xf2],
  'f64x2.convert_low_i32x4_s': [0xfd, 0xfe],
} as const satisfies Record<string, number | readonly [number, number]>;

/** Memory instructions, with the log2 of their natural alignment. */
const MEMORY = {
  'i32.load': [[0x28], 2],
  'f32.load': [[0x2a], 2],
  'f64.load': [[0x2b], 3],
  'i32.store': [[0x36], 2],
  'f32.store': [[0x38], 2],
  'f64.store': [[0x39], 3],
  'v128.load': [[0xfd, 0x00], 4],
  'v128.store': [[0xfd, 0x0b], 4],
  'v128.load32_zero': [[0xfd, 0x5c], 2],
  'v128.load64_zero': [[0xfd, 0x5d], 3],
  'v128.load32_splat': [[0xfd, 0x09], 2],
} as const satisfies Record<string, readonly [readonly number[], number]>;

/** Memory instructions that read or write one lane of a vector. */
const MEMORY_LANE = {
  'v128.load32_lane': [0x56, 2],
  'v128.load64_lane': [0x57, 3],
  'v128.store32_lane': [0x5a, 2],
  'v128.store64_lane': [0x5b, 3],
} as const satisfies Record<string, readonly [number, number]>;

const LANE = {
  'i32x4.extract_lane': 0x1b,
  'i32x4.replace_lane': 0x1c,
  'f32x4.extract_lane': 0x1f,
  'f32x4.replace_lane': 0x20,
  'f64x2.extract_lane': 0x21,
  'f64x2.replace_lane': 0x22,
} as const satisfies Record<string, number>;

export type PlainOp = keyof typeof PLAIN;
export type MemoryOp = keyof typeof MEMORY;
export type MemoryLaneOp = keyof typeof MEMORY_LANE;
export type LaneOp = keyof typeof LANE;

function uleb(out: number[], value: number): void {
  let v = value >>> 0;
  do {
    const byte = v & 0x7f;
    v >>>= 7;
    out.push(v === 0 ? byte : byte | 0x80);
  } while (v !== 0);
}

function sleb(out: number[], value: number): void {
  let v = value | 0;
  for (;;) {
    const byte = v & 0x7f;
    v >>= 7;
    const done = (v === 0 && (byte & 0x40) === 0) || (v === -1 && (byte & 0x40) !== 0);
    out.push(done ? byte : byte | 0x80);
    if (done) return;
  }
}

function opcode(out: number[], op: number | readonly number[]): void {
  if (typeof op === 'number') out.push(op);
  else {
    out.push(op[0]);
    for (let i = 1; i < op.length; i++) uleb(out, op[i]);
  }
}

function name(out: number[], s: string): void {
  const bytes = new TextEncoder().encode(s);
  uleb(out, bytes.length);
  out.push(...bytes);
}

interface Signature {
  params: readonly ValType[];
  results: readonly ValType[];
}

/** One function body under construction: named locals, named labels, instructions. */
export class FunctionBuilder {
  readonly code: number[] = [];
  private readonly localIndex = new Map<string, number>();
  private readonly localTypes: ValType[] = [];
  private readonly labels: string[] = [];

  constructor(
    readonly signature: Signature,
    paramNames: readonly string[],
    private readonly resolveFunction: (name: string) => number,
  ) {
    if (paramNames.length !== signature.params.length) throw new Error('one name per parameter');
    paramNames.forEach((n, i) => this.localIndex.set(n, i));
  }

  /** Declare a local (after the parameters). */
  local(localName: string, type: ValType): this {
    if (this.localIndex.has(localName)) throw new Error(`local ${localName} declared twice`);
    this.localIndex.set(localName, this.signature.params.length + this.localTypes.length);
    this.localTypes.push(type);
    return this;
  }

  private index(localName: string): number {
    const i = this.localIndex.get(localName);
    if (i === undefined) throw new Error(`unknown local ${localName}`);
    return i;
  }

  op(...ops: PlainOp[]): this {
    for (const o of ops) opcode(this.code, PLAIN[o]);
    return this;
  }

  get(...locals: string[]): this {
    for (const l of locals) {
      this.code.push(0x20);
      uleb(this.code, this.index(l));
    }
    return this;
  }

  set(localName: string): this {
    this.code.push(0x21);
    uleb(this.code, this.index(localName));
    return this;
  }

  tee(localName: string): this {
    this.code.push(0x22);
    uleb(this.code, this.index(localName));
    return this;
  }

  i32(value: number): this {
    this.code.push(0x41);
    sleb(this.code, value);
    return this;
  }

  f64(value: number): this {
    this.code.push(0x44);
    const b = new Uint8Array(new Float64Array([value]).buffer);
    this.code.push(...b);
    return this;
  }

  /** A v128 constant from four i32 lanes. */
  i32x4(a: number, b: number, c: number, d: number): this {
    opcode(this.code, [0xfd, 0x0c]);
    this.code.push(...new Uint8Array(new Int32Array([a, b, c, d]).buffer));
    return this;
  }

  /** i8x16.shuffle: byte k of the result is byte lanes[k] of (first ‖ second). */
  shuffle(lanes: readonly number[]): this {
    if (lanes.length !== 16 || lanes.some((l) => l < 0 || l > 31)) throw new Error('shuffle needs 16 lanes in [0, 32)');
    opcode(this.code, [0xfd, 0x0d]);
    this.code.push(...lanes);
    return this;
  }

  mem(o: MemoryOp, offset = 0): this {
    const [op, align] = MEMORY[o];
    opcode(this.code, op);
    uleb(this.code, align);
    uleb(this.code, offset);
    return this;
  }

  memLane(o: MemoryLaneOp, offset: number, lane: number): this {
    const [op, align] = MEMORY_LANE[o];
    opcode(this.code, [0xfd, op]);
    uleb(this.code, align);
    uleb(this.code, offset);
    this.code.push(lane);
    return this;
  }

  lane(o: LaneOp, lane: number): this {
    opcode(this.code, [0xfd, LANE[o]]);
    this.code.push(lane);
    return this;
  }

  call(functionName: string): this {
    this.code.push(0x10);
    uleb(this.code, this.resolveFunction(functionName));
    return this;
  }

  private open(opcodeByte: number, label: string, result?: ValType): this {
    this.code.push(opcodeByte, result ? VALTYPE[result] : 0x40);
    this.labels.push(label);
    return this;
  }

  block(label: string, result?: ValType): this {
    return this.open(0x02, label, result);
  }

  loop(label: string, result?: ValType): this {
    return this.open(0x03, label, result);
  }

  if(label: string, result?: ValType): this {
    return this.open(0x04, label, result);
  }

  else(): this {
    this.code.push(0x05);
    return this;
  }

  end(): this {
    if (this.labels.pop() === undefined) throw new Error('end without an open block');
    this.code.push(0x0b);
    return this;
  }

  private depth(label: string): number {
    const i = this.labels.lastIndexOf(label);
    if (i < 0) throw new Error(`no enclosing block ${label}`);
    return this.labels.length - 1 - i;
  }

  br(label: string): this {
    this.code.push(0x0c);
    uleb(this.code, this.depth(label));
    return this;
  }

  brIf(label: string): this {
    this.code.push(0x0d);
    uleb(this.code, this.depth(label));
    return this;
  }

  /** The body in the binary format: local declarations, instructions, the final `end`. */
  encode(): number[] {
    if (this.labels.length !== 0) throw new Error(`unclosed blocks: ${this.labels.join(', ')}`);
    const body: number[] = [];
    const runs: Array<[number, ValType]> = [];
    for (const t of this.localTypes) {
      const last = runs[runs.length - 1];
      if (last && last[1] === t) last[0]++;
      else runs.push([1, t]);
    }
    uleb(body, runs.length);
    for (const [count, t] of runs) {
      uleb(body, count);
      body.push(VALTYPE[t]);
    }
    body.push(...this.code, 0x0b);
    const out: number[] = [];
    uleb(out, body.length);
    out.push(...body);
    return out;
  }
}

interface ImportEntry {
  module: string;
  field: string;
  signature: Signature;
}

/** A module with function imports, one exported memory and exported functions. */
export class ModuleBuilder {
  private readonly imports: ImportEntry[] = [];
  private readonly functions: Array<{ exportName?: string; builder: FunctionBuilder }> = [];
  private readonly functionIndex = new Map<string, number>();
  private memoryPages = 0;

  importFunction(localName: string, module: string, field: string, signature: Signature): this {
    if (this.functions.length > 0) throw new Error('declare imports before functions');
    this.functionIndex.set(localName, this.imports.length);
    this.imports.push({ module, field, signature });
    return this;
  }

  /** One memory of `pages` × 64 KiB, exported as "memory". */
  memory(pages: number): this {
    this.memoryPages = pages;
    return this;
  }

  /** Declare a function; it may call imports and the functions declared before it. */
  func(functionName: string, params: ReadonlyArray<readonly [string, ValType]>, results: readonly ValType[], options: { export?: boolean } = {}): FunctionBuilder {
    if (this.functionIndex.has(functionName)) throw new Error(`function ${functionName} declared twice`);
    this.functionIndex.set(functionName, this.imports.length + this.functions.length);
    const builder = new FunctionBuilder(
      { params: params.map((p) => p[1]), results },
      params.map((p) => p[0]),
      (n) => {
        const i = this.functionIndex.get(n);
        if (i === undefined) throw new Error(`unknown function ${n}`);
        return i;
      },
    );
    this.functions.push({ exportName: options.export ? functionName : undefined, builder });
    return builder;
  }

  encode(): Uint8Array<ArrayBuffer> {
    const types: string[] = [];
    const typeIndex = (s: Signature): number => {
      const k = `${s.params.join(',')}>${s.results.join(',')}`;
      let i = types.indexOf(k);
      if (i < 0) i = types.push(k) - 1;
      return i;
    };
    const importTypes = this.imports.map((im) => typeIndex(im.signature));
    const functionTypes = this.functions.map((f) => typeIndex(f.builder.signature));

    const out: number[] = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
    const section = (id: number, content: number[]) => {
      out.push(id);
      uleb(out, content.length);
      out.push(...content);
    };

    const typeSection: number[] = [];
    uleb(typeSection, types.length);
    for (const k of types) {
      const [ps, rs] = k.split('>').map((x) => (x ? (x.split(',') as ValType[]) : []));
      typeSection.push(0x60);
      uleb(typeSection, ps.length);
      for (const p of ps) typeSection.push(VALTYPE[p]);
      uleb(typeSection, rs.length);
      for (const r of rs) typeSection.push(VALTYPE[r]);
    }
    section(1, typeSection);

    if (this.imports.length > 0) {
      const importSection: number[] = [];
      uleb(importSection, this.imports.length);
      this.imports.forEach((im, i) => {
        name(importSection, im.module);
        name(importSection, im.field);
        importSection.push(0x00);
        uleb(importSection, importTypes[i]);
      });
      section(2, importSection);
    }

    const functionSection: number[] = [];
    uleb(functionSection, functionTypes.length);
    for (const t of functionTypes) uleb(functionSection, t);
    section(3, functionSection);

    if (this.memoryPages > 0) {
      const memorySection: number[] = [1, 0x00];
      uleb(memorySection, this.memoryPages);
      section(5, memorySection);
    }

    const exportSection: number[] = [];
    const exported = this.functions.map((f, i) => [f.exportName, i] as const).filter((e): e is readonly [string, number] => e[0] !== undefined);
    uleb(exportSection, exported.length + (this.memoryPages > 0 ? 1 : 0));
    if (this.memoryPages > 0) {
      name(exportSection, 'memory');
      exportSection.push(0x02, 0x00);
    }
    for (const [n, i] of exported) {
      name(exportSection, n);
      exportSection.push(0x00);
      uleb(exportSection, this.imports.length + i);
    }
    section(7, exportSection);

    const codeSection: number[] = [];
    uleb(codeSection, this.functions.length);
    for (const f of this.functions) codeSection.push(...f.builder.encode());
    section(10, codeSection);

    return Uint8Array.from(out);
  }
}
