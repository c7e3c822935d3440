/**
 * The decoder's forward pass in plain TypeScript (float64 arithmetic), written from the architecture rather
 * than from the ONNX graph, so it checks the graph's numerics: one unpadded sequence in, logits out.
 */
import { architecture, headDim, kvHeads, rotaryInverseFrequencies, type ModelConfig } from './config.ts';
import type { NamedTensor } from '../onnx/named-tensor.ts';

type Vec = Float64Array;

/** Logits [S][V] for token ids at positions 0..S−1 (`lastOnly`: [1][V], the last position's). */
export function referenceForward(c: ModelConfig, weights: readonly NamedTensor[], ids: readonly number[], lastOnly = false): Float64Array[] {
  const byName = new Map(weights.map((w) => [w.name, w]));
  const get = (name: string) => {
    const w = byName.get(name);
    if (!w) throw new Error(`weights: missing tensor "${name}"`);
    return w;
  };
  const a = architecture(c);
  const D = c.hidden_size;
  const H = c.num_attention_heads;
  const KV = kvHeads(c);
  const hd = headDim(c);
  const eps = c.rms_norm_eps ?? (a.gemma ? 1e-6 : 1e-5);
  const inv = rotaryInverseFrequencies(c);
  // Gemma's norms scale by (1 + w)
  const norm = (x: Vec, name: string) => rmsNorm(x, get(name).data, eps, a.gemma ? 1 : 0);
  const linear = (x: Vec, name: string, withBias: boolean) => {
    const y = matVec(x, get(`${name}.weight`));
    return withBias ? add(y, Float64Array.from(get(`${name}.bias`).data)) : y;
  };
  /** Per-head RMSNorm (Qwen3's q_norm / k_norm) over each head_dim slice. */
  const headNorm = (x: Vec, heads: number, name: string) => {
    const out = new Float64Array(x.length);
    for (let h = 0; h < heads; h++) out.set(norm(x.subarray(h * hd, (h + 1) * hd), name), h * hd);
    return out;
  };

  const embed = get('model.embed_tokens.weight').data;
  let xs: Vec[] = ids.map((id) => Float64Array.from(embed.subarray(id * D, (id + 1) * D), (v) => (a.gemma ? v * Math.sqrt(D) : v)));

  for (let l = 0; l < c.num_hidden_layers; l++) {
    const p = `model.layers.${l}`;
    const hs = xs.map((x) => norm(x, `${p}.input_layernorm.weight`));
    const q = hs.map((h, pos) => {
      const y = linear(h, `${p}.self_attn.q_proj`, a.qkvBias);
      return rotary(a.qkNorm ? headNorm(y, H, `${p}.self_attn.q_norm.weight`) : y, pos, H, hd, inv);
    });
    const k = hs.map((h, pos) => {
      const y = linear(h, `${p}.self_attn.k_proj`, a.qkvBias);
      return rotary(a.qkNorm ? headNorm(y, KV, `${p}.self_attn.k_norm.weight`) : y, pos, KV, hd, inv);
    });
    const v = hs.map((h) => linear(h, `${p}.self_attn.v_proj`, a.qkvBias));
    const attended = q.map((qs, s) => {
      const out = new Float64Array(H * hd);
      for (let head = 0; head < H; head++) {
        const o = head * hd;
        // grouped-query attention: query head h reads key/value head ⌊h / (H / KV)⌋
        const ko = Math.floor(head / (H / KV)) * hd;
        const scores = Array.from({ length: s + 1 }, (_, j) => {
          let dot = 0;
          for (let d = 0; d < hd; d++) dot += qs[o + d] * k[j][ko + d];
          return dot / Math.sqrt(hd);
        });
        const max = Math.max(...scores);
        const e = scores.map((z) => Math.exp(z - max));
        const sum = e.reduce((x, y) => x + y, 0);
        for (let j = 0; j <= s; j++) for (let d = 0; d < hd; d++) out[o + d] += (e[j] / sum) * v[j][ko + d];
      }
      return out;
    });
    xs = xs.map((x, s) => add(x, linear(attended[s], `${p}.self_attn.o_proj`, a.oBias)));
    xs = xs.map((x) => {
      const h = norm(x, `${p}.post_attention_layernorm.weight`);
      const gate = matVec(h, get(`${p}.mlp.gate_proj.weight`));
      const up = matVec(h, get(`${p}.mlp.up_proj.weight`));
      const act = gate.map((gv, i) => (a.gemma ? geluTanh(gv) : gv / (1 + Math.exp(-gv))) * up[i]);
      return add(x, matVec(act, get(`${p}.mlp.down_proj.weight`)));
    });
  }
  const head = (x: Vec) => (a.tied ? rowDots(x, get('model.embed_tokens.weight')) : matVec(x, get('lm_head.weight')));
  return (lastOnly ? xs.slice(-1) : xs).map((x) => head(norm(x, 'model.norm.weight')));
}

function geluTanh(x: number): number {
  return 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)));
}

/** The tied head: x against each row of the embedding table [V, D]. */
function rowDots(x: Vec, w: NamedTensor): Vec {
  const [n, m] = w.dims;
  const out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    let dot = 0;
    for (let j = 0; j < m; j++) dot += x[j] * w.data[i * m + j];
    out[i] = dot;
  }
  return out;
}

function rmsNorm(x: Vec, w: Float32Array, eps: number, offset: number): Vec {
  let ms = 0;
  for (const v of x) ms += v * v;
  const inv = 1 / Math.sqrt(ms / x.length + eps);
  return x.map((v, i) => v * inv * (offset + w[i]));
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
function rotary(x: Vec, pos: number, H: number, hd: number, inv: Float64Array): Vec {
  const out = new Float64Array(x.length);
  const half = hd / 2;
  for (let h = 0; h < H; h++) {
    const o = h * hd;
    for (let i = 0; i < half; i++) {
      const angle = pos * inv[i];
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
