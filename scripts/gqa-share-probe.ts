/**
 * Probe: does onnxruntime-node's CPU GroupQueryAttention (com.microsoft) write a decode step's key/value
 * into the past buffer itself when the same tensor is fed as past_key and pre-allocated as present_key
 * (past_present_share_buffer), and do rows of different lengths (seqlens_k per row) match a reference
 * attention? Prints one line per check; exits 1 on a mismatch.
 */
import * as ort from 'onnxruntime-node';
import { GraphBuilder } from '../trainer/engine/onnx/graph-builder.ts';
import { DataType, encodeModel } from '../trainer/engine/onnx/proto.ts';

// head_size must be a multiple of 8 for the CPU kernel
const B = 2, H = 2, KV = 1, hd = 8, M = 8;
const g = new GraphBuilder();
const q = g.input('query', DataType.FLOAT, ['B', 'S', H * hd]);
const k = g.input('key', DataType.FLOAT, ['B', 'S', KV * hd]);
const v = g.input('value', DataType.FLOAT, ['B', 'S', KV * hd]);
const pk = g.input('past_key', DataType.FLOAT, ['B', KV, M, hd]);
const pv = g.input('past_value', DataType.FLOAT, ['B', KV, M, hd]);
const sl = g.input('seqlens_k', DataType.INT32, ['B']);
const tl = g.input('total_sequence_length', DataType.INT32, []);
const [o, prk, prv] = g.op('GroupQueryAttention', [q, k, v, pk, pv, sl, tl], { num_heads: H, kv_num_heads: KV }, 3, 'com.microsoft');
g.nameOutput(o, 'output');
g.nameOutput(prk, 'present_key');
g.nameOutput(prv, 'present_value');
g.output('output', DataType.FLOAT, ['B', 'S', H * hd]);
g.output('present_key', DataType.FLOAT, ['B', KV, M, hd]);
g.output('present_value', DataType.FLOAT, ['B', KV, M, hd]);
const session = await ort.InferenceSession.create(encodeModel(g.model('gqa-probe')), { executionProviders: ['cpu'] });

let seed = 1;
const rnd = (n: number) => Float32Array.from({ length: n }, () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32) * 2 - 1);
const kBuf = new Float32Array(B * KV * M * hd);
const vBuf = new Float32Array(B * KV * M * hd);
const pastK = new ort.Tensor('float32', kBuf, [B, KV, M, hd]);
const pastV = new ort.Tensor('float32', vBuf, [B, KV, M, hd]);
// reference K/V per row, the rows' lengths apart: row 1 starts two tokens later
const refK: number[][][] = [[], []];
const refV: number[][][] = [[], []];
const lens = [0, 0];
let bad = 0;
for (let step = 0; step < 6; step++) {
  const active = [true, step >= 2];
  const qs = rnd(B * H * hd), ks = rnd(B * KV * hd), vs = rnd(B * KV * hd);
  for (let b = 0; b < B; b++) if (active[b]) { refK[b].push([...ks.subarray(b * hd, b * hd + hd)]); refV[b].push([...vs.subarray(b * hd, b * hd + hd)]); lens[b]++; }
  // an inactive row still runs: it writes at its own position, a slot it overwrites when it starts
  const seqlens = Int32Array.from(lens.map((l, b) => (active[b] ? l - 1 : Math.max(l, 1) - 1)));
  const total = Math.max(...lens);
  const out = await session.run(
    { query: new ort.Tensor('float32', qs, [B, 1, H * hd]), key: new ort.Tensor('float32', ks, [B, 1, KV * hd]), value: new ort.Tensor('float32', vs, [B, 1, KV * hd]), past_key: pastK, past_value: pastV, seqlens_k: new ort.Tensor('int32', seqlens, [B]), total_sequence_length: new ort.Tensor('int32', Int32Array.of(total), []) },
    { output: null, present_key: pastK, present_value: pastV },
  );
  const got = out.output.data as Float32Array;
  let maxErr = 0;
  for (let b = 0; b < B; b++) {
    if (!active[b]) continue;
    for (let h = 0; h < H; h++) {
      const qv = qs.subarray((b * H + h) * hd, (b * H + h + 1) * hd);
      const scores = refK[b].map((kk) => kk.reduce((a, x, i) => a + x * qv[i], 0) / Math.sqrt(hd));
      const mx = Math.max(...scores);
      const w = scores.map((s) => Math.exp(s - mx));
      const z = w.reduce((a, x) => a + x, 0);
      for (let i = 0; i < hd; i++) {
        const ref = refV[b].reduce((a, vv, j) => a + (w[j] / z) * vv[i], 0);
        maxErr = Math.max(maxErr, Math.abs(ref - got[(b * H + h) * hd + i]));
      }
    }
  }
  const inPlace = [0, 1].every((b) => refK[b].every((kk, j) => kk.every((x, i) => kBuf[(b * M + j) * hd + i] === x)));
  console.log(`step ${step}: lengths ${lens.join(',')} · cache written in place: ${inPlace} · max |output − reference| ${maxErr.toExponential(2)}`);
  if (!inPlace || maxErr > 1e-5) bad++;
}
process.exit(bad ? 1 : 0);
