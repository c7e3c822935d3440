/**
 * The decoder's forward pass in plain TypeScript (float64 arithmetic), written from the architecture rather
 * than from the ONNX graph, so it checks the graph's numerics: one unpadded sequence in, logits out.
 */
import { headDim, type ModelConfig } from './config.ts';
import type { NamedTensor } from '../onnx/named-tensor.ts';

type Vec = Float64Array;

/** Logits [S][V] for token ids at positions 0..S−1. */
export function referenceForward(c: ModelConfig, weights: readonly NamedTensor[], ids: readonly number[]): Float64Array[] {
  const byName = new Map(weights.map((w) => [w.name, w]));
  const get = (name: string) => {
    const w = byName.get(name);
    if (!w) throw new Error(`weights: missing tensor "${name}"`);
    return w;
  };
  const D = c.hidden_size;
  const H = c.num_attention_heads;
  const hd = headDim(c);
  const eps = c.rms_norm_eps ?? 1e-5;
  const theta = c.rope_theta ?? 10000;
  const S = ids.length;

  const embed = get('model.embed_tokens.weight').data;
  let xs: Vec[] = ids.map((id) => Float64Array.from(embed.subarray(id * D, (id + 1) * D)));

  for (let l = 0; l < c.num_hidden_layers; l++) {
    const p = `model.layers.${l}`;
    const hs = xs.map((x) => rmsNorm(x, get(`${p}.input_layernorm.weight`).data, eps));
    const q = hs.map((h, pos) => rotary(matVec(h, get(`${p}.self_attn.q_proj.weight`)), pos, H, hd, theta));
    const k = hs.map((h, pos) => rotary(matVec(h, get(`${p}.self_attn.k_proj.weight`)), pos, H, hd, theta));
    const v = hs.map((h) => matVec(h, get(`${p}.self_attn.v_proj.weight`)));
    const attended = q.map((qs, s) => {
      const out = new Float64Array(H * hd);
      for (let head = 0; head < H; head++) {
        const o = head * hd;
        const scores = Array.from({ length: s + 1 }, (_, j) => {
          let dot = 0;
          for (let d = 0; d < hd; d++) dot += qs[o + d] * k[j][o + d];
          return dot / Math.sqrt(hd);
        });
        const max = Math.max(...scores);
        const e = scores.map((z) => Math.exp(z - max));
        const sum = e.reduce((a, b) => a + b, 0);
        for (let j = 0; j <= s; j++) for (let d = 0; d < hd; d++) out[o + d] += (e[j] / sum) * v[j][o + d];
      }
      return out;
    });
    xs = xs.map((x, s) => add(x, matVec(attended[s], get(`${p}.self_attn.o_proj.weight`))));
    xs = xs.map((x) => {
      const h = rmsNorm(x, get(`${p}.post_attention_layernorm.weight`).data, eps);
      const gate = matVec(h, get(`${p}.mlp.gate_proj.weight`));
      const up = matVec(h, get(`${p}.mlp.up_proj.weight`));
      const act = gate.map((gv, i) => (gv / (1 + Math.exp(-gv))) * up[i]);
      return add(x, matVec(act, get(`${p}.mlp.down_proj.weight`)));
    });
  }
  return xs.map((x) => matVec(rmsNorm(x, get('model.norm.weight').data, eps), get('lm_head.weight')));
}

function rmsNorm(x: Vec, w: Float32Array, eps: number): Vec {
  let ms = 0;
  for (const v of x) ms += v * v;
  const inv = 1 / Math.sqrt(ms / x.length + eps);
  return x.map((v, i) => v * inv * w[i]);
}

/** x·W with W [in, out] row-major. */
function matVec(x: Vec, w: NamedTensor): Vec {
  const [n, m] = w.dims;
  const out = new Float64Array(m);
  for (let i = 0; i < n; i++) {
    const xi = x[i];
    const row = i * m;
    for (let j = 0; j < m; j++) out[j] += xi * w.data[row + j];
  }
  return out;
}

function add(a: Vec, b: Vec): Vec {
  return a.map((v, i) => v + b[i]);
}

/** Rotate-half rotary embedding (Llama/NeoX layout) for each head of a projected vector. */
function rotary(x: Vec, pos: number, H: number, hd: number, theta: number): Vec {
  const out = new Float64Array(x.length);
  const half = hd / 2;
  for (let h = 0; h < H; h++) {
    const o = h * hd;
    for (let i = 0; i < half; i++) {
      const angle = pos / theta ** ((2 * i) / hd);
      const c = Math.cos(angle);
      const s = Math.sin(angle);
      const a = x[o + i];
      const b = x[o + i + half];
      out[o + i] = a * c - b * s;
      out[o + i + half] = b * c + a * s;
    }
  }
  return out;
}
