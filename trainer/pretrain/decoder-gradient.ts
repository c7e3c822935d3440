/**
 * The decoder's loss and its gradient in plain TypeScript: the forward pass of trainer/model/build-decoder.ts
 * (RMSNorm, rotary positions, causal multi-head attention, SwiGLU MLP, untied LM head) kept with its
 * activations, then a hand-written backward pass. It exists so the demo's base agent can be pretrained by
 * supervised imitation without an autodiff dependency; test/demo/decoder-gradient.test.ts checks every
 * tensor's gradient against central finite differences and the loss against the ONNX graph's logits.
 *
 * Arithmetic is float64 throughout (weights are read from their float32 arrays). The forward and backward
 * passes stay in one file past 300 lines because each backward step mirrors a forward step read beside it.
 */
import { headDim, type ModelConfig } from '../model/config.ts';
import type { NamedTensor } from '../onnx/named-tensor.ts';

/** One training sequence: token ids, and which positions' next-token predictions count towards the loss. */
export interface LossSequence {
  ids: readonly number[];
  /** Position t predicts ids[t + 1]; only targets listed here are scored (each in 0..ids.length-2). */
  targets: readonly number[];
  /** Weight of each target's cross-entropy in the loss (default 1 each), aligned with `targets`. */
  weights?: readonly number[];
}

type Vec = Float64Array;

interface LayerCache {
  xIn: Vec; // [S, D] residual stream entering the layer
  inv1: Vec; // [S] 1/rms of xIn
  h: Vec; // [S, D]
  q: Vec; // [S, D] rotated and scaled
  k: Vec; // [S, D] rotated
  v: Vec; // [S, D]
  p: Vec; // [H, S, S] attention probabilities (row s, keys j ≤ s)
  ctx: Vec; // [S, D]
  xMid: Vec; // [S, D] after the attention residual
  inv2: Vec; // [S]
  h2: Vec; // [S, D]
  gate: Vec; // [S, F]
  up: Vec; // [S, F]
  act: Vec; // [S, F]
}

/** X [S, n] · W [n, m] → [S, m], rows from `from` on (earlier rows stay zero). */
function matmul(x: Vec, S: number, n: number, w: Float32Array, m: number, from = 0): Vec {
  const out = new Float64Array(S * m);
  for (let s = from; s < S; s++) {
    const o = s * m;
    for (let i = 0; i < n; i++) {
      const xi = x[s * n + i];
      if (xi === 0) continue;
      const row = i * m;
      for (let j = 0; j < m; j++) out[o + j] += xi * w[row + j];
    }
  }
  return out;
}

/** Whether row s of a [S, m] matrix is all zero (rows no scored position depends on carry no gradient). */
function zeroRow(x: Vec, s: number, m: number): boolean {
  for (let j = s * m, end = j + m; j < end; j++) if (x[j] !== 0) return false;
  return true;
}

/** dY [S, m] · Wᵀ → [S, n] (W is [n, m]). */
function matmulT(dy: Vec, S: number, m: number, w: Float32Array, n: number): Vec {
  const out = new Float64Array(S * n);
  for (let s = 0; s < S; s++) {
    const o = s * m;
    if (zeroRow(dy, s, m)) continue;
    for (let i = 0; i < n; i++) {
      const row = i * m;
      let acc = 0;
      for (let j = 0; j < m; j++) acc += dy[o + j] * w[row + j];
      out[s * n + i] = acc;
    }
  }
  return out;
}

/** dW [n, m] += Xᵀ [n, S] · dY [S, m]. */
function accumulateOuter(dw: Vec, x: Vec, S: number, n: number, dy: Vec, m: number): void {
  for (let s = 0; s < S; s++) {
    const o = s * m;
    if (zeroRow(dy, s, m)) continue;
    for (let i = 0; i < n; i++) {
      const xi = x[s * n + i];
      if (xi === 0) continue;
      const row = i * m;
      for (let j = 0; j < m; j++) dw[row + j] += xi * dy[o + j];
    }
  }
}

function rmsNormForward(x: Vec, S: number, D: number, g: Float32Array, eps: number, from = 0): { y: Vec; inv: Vec } {
  const y = new Float64Array(S * D);
  const inv = new Float64Array(S);
  for (let s = from; s < S; s++) {
    let ms = 0;
    for (let d = 0; d < D; d++) ms += x[s * D + d] ** 2;
    const r = 1 / Math.sqrt(ms / D + eps);
    inv[s] = r;
    for (let d = 0; d < D; d++) y[s * D + d] = x[s * D + d] * r * g[d];
  }
  return { y, inv };
}

/** y = x·inv·g; adds dL/dx into `dx` and dL/dg into `dg`. */
function rmsNormBackward(dy: Vec, x: Vec, inv: Vec, S: number, D: number, g: Float32Array, dx: Vec, dg: Vec): void {
  for (let s = 0; s < S; s++) {
    const r = inv[s];
    let dot = 0;
    for (let d = 0; d < D; d++) {
      const i = s * D + d;
      dg[d] += dy[i] * x[i] * r;
      dot += dy[i] * g[d] * x[i];
    }
    const c = (r * r * r * dot) / D;
    for (let d = 0; d < D; d++) {
      const i = s * D + d;
      dx[i] += r * dy[i] * g[d] - x[i] * c;
    }
  }
}

/** Rotate-half rotary tables: cos/sin [S, hd/2] for positions 0..S−1. */
function rotaryTables(S: number, hd: number, theta: number): { cos: Vec; sin: Vec } {
  const half = hd / 2;
  const cos = new Float64Array(S * half);
  const sin = new Float64Array(S * half);
  for (let s = 0; s < S; s++) {
    for (let i = 0; i < half; i++) {
      // Same float32 inverse frequencies as the graph's /rotary/inv_freq initializer.
      const angle = s * Math.fround(1 / theta ** ((2 * i) / hd));
      cos[s * half + i] = Math.cos(angle);
      sin[s * half + i] = Math.sin(angle);
    }
  }
  return { cos, sin };
}

/** In place: rotate every head of x [S, H·hd]; `inverse` applies the transpose (the backward pass). */
function rotate(x: Vec, S: number, H: number, hd: number, t: { cos: Vec; sin: Vec }, inverse: boolean): void {
  const half = hd / 2;
  const D = H * hd;
  for (let s = 0; s < S; s++) {
    for (let h = 0; h < H; h++) {
      const o = s * D + h * hd;
      for (let i = 0; i < half; i++) {
        const c = t.cos[s * half + i];
        const sn = inverse ? -t.sin[s * half + i] : t.sin[s * half + i];
        const a = x[o + i];
        const b = x[o + i + half];
        x[o + i] = a * c - b * sn;
        x[o + i + half] = b * c + a * sn;
      }
    }
  }
}

export class DecoderGradient {
  private readonly byName: Map<string, NamedTensor>;
  private readonly D: number;
  private readonly H: number;
  private readonly hd: number;
  private readonly F: number;
  private readonly V: number;
  private readonly L: number;
  private readonly eps: number;
  private readonly theta: number;

  constructor(
    readonly config: ModelConfig,
    readonly weights: readonly NamedTensor[],
  ) {
    this.byName = new Map(weights.map((w) => [w.name, w]));
    this.D = config.hidden_size;
    this.H = config.num_attention_heads;
    this.hd = headDim(config);
    this.F = config.intermediate_size ?? 4 * this.D;
    this.V = config.vocab_size;
    this.L = config.num_hidden_layers;
    this.eps = config.rms_norm_eps ?? 1e-5;
    this.theta = config.rope_theta ?? 10000;
    // Same restriction as the graph builder: multi-head attention whose heads tile the hidden size.
    if ((config.num_key_value_heads ?? this.H) !== this.H || this.H * this.hd !== this.D) {
      throw new Error('the decoder gradient supports multi-head attention with heads × head_dim = hidden_size only');
    }
  }

  private w(name: string): Float32Array {
    const t = this.byName.get(name);
    if (!t) throw new Error(`weights: missing tensor "${name}"`);
    return t.data;
  }

  /** Zeroed gradient buffers, one per weight, in the weights' order. */
  zeroGradients(): Vec[] {
    return this.weights.map((t) => new Float64Array(t.data.length));
  }

  /**
   * Adds the gradient of this sequence's weighted summed cross-entropy (natural log, over its targets) into `grads`
   * (aligned with the weights) and returns that loss and the summed weight of the targets the argmax got right.
   */
  accumulate(seq: LossSequence, grads: Vec[]): { loss: number; correct: number } {
    const { D, H, hd, F, V, L, eps } = this;
    const ids = seq.ids;
    const S = ids.length;
    for (const t of seq.targets) if (!Number.isInteger(t) || t < 0 || t >= S - 1) throw new RangeError(`target position ${t} is outside 0..${S - 2}`);
    if (seq.weights && seq.weights.length !== seq.targets.length) throw new RangeError(`${seq.weights.length} weights for ${seq.targets.length} targets`);
    const gradOf = new Map(this.weights.map((t, i) => [t.name, grads[i]]));
    const g = (name: string) => gradOf.get(name)!;
    const rope = rotaryTables(S, hd, this.theta);
    const scale = 1 / Math.sqrt(hd);

    // ---- forward ----
    const embed = this.w('model.embed_tokens.weight');
    let x: Vec = new Float64Array(S * D);
    for (let s = 0; s < S; s++) for (let d = 0; d < D; d++) x[s * D + d] = embed[ids[s] * D + d];
    const caches: LayerCache[] = [];
    // The last layer's rows before the first scored position reach the loss only through its keys and
    // values: its queries, attention output and MLP are computed from that row on (the rest stay zero,
    // and the backward pass skips rows whose gradient is zero).
    const firstTarget = seq.targets.length ? Math.min(...seq.targets) : S;
    for (let l = 0; l < L; l++) {
      const p = `model.layers.${l}`;
      const from = l === L - 1 ? firstTarget : 0;
      const n1 = rmsNormForward(x, S, D, this.w(`${p}.input_layernorm.weight`), eps);
      const q = matmul(n1.y, S, D, this.w(`${p}.self_attn.q_proj.weight`), D, from);
      const k = matmul(n1.y, S, D, this.w(`${p}.self_attn.k_proj.weight`), D);
      const v = matmul(n1.y, S, D, this.w(`${p}.self_attn.v_proj.weight`), D);
      rotate(q, S, H, hd, rope, false);
      rotate(k, S, H, hd, rope, false);
      for (let i = 0; i < q.length; i++) q[i] *= scale;
      const probs = new Float64Array(H * S * S);
      const ctx = new Float64Array(S * D);
      for (let h = 0; h < H; h++) {
        const o = h * hd;
        for (let s = from; s < S; s++) {
          const row = (h * S + s) * S;
          let max = -Infinity;
          for (let j = 0; j <= s; j++) {
            let dot = 0;
            for (let d = 0; d < hd; d++) dot += q[s * D + o + d] * k[j * D + o + d];
            probs[row + j] = dot;
            if (dot > max) max = dot;
          }
          let sum = 0;
          for (let j = 0; j <= s; j++) sum += probs[row + j] = Math.exp(probs[row + j] - max);
          for (let j = 0; j <= s; j++) {
            const pj = (probs[row + j] /= sum);
            for (let d = 0; d < hd; d++) ctx[s * D + o + d] += pj * v[j * D + o + d];
          }
        }
      }
      const attnOut = matmul(ctx, S, D, this.w(`${p}.self_attn.o_proj.weight`), D, from);
      const xMid = new Float64Array(S * D);
      for (let i = from * D; i < xMid.length; i++) xMid[i] = x[i] + attnOut[i];
      const n2 = rmsNormForward(xMid, S, D, this.w(`${p}.post_attention_layernorm.weight`), eps, from);
      const gate = matmul(n2.y, S, D, this.w(`${p}.mlp.gate_proj.weight`), F, from);
      const up = matmul(n2.y, S, D, this.w(`${p}.mlp.up_proj.weight`), F, from);
      const act = new Float64Array(S * F);
      for (let i = from * F; i < act.length; i++) act[i] = (gate[i] / (1 + Math.exp(-gate[i]))) * up[i];
      const mlpOut = matmul(act, S, F, this.w(`${p}.mlp.down_proj.weight`), D, from);
      const xOut = new Float64Array(S * D);
      for (let i = from * D; i < xOut.length; i++) xOut[i] = xMid[i] + mlpOut[i];
      caches.push({ xIn: x, inv1: n1.inv, h: n1.y, q, k, v, p: probs, ctx, xMid, inv2: n2.inv, h2: n2.y, gate, up, act });
      x = xOut;
    }

    // The head runs on the scored positions only: nothing else reaches the loss.
    const T = seq.targets.length;
    const xT = new Float64Array(T * D);
    seq.targets.forEach((t, r) => xT.set(x.subarray(t * D, (t + 1) * D), r * D));
    const nf = rmsNormForward(xT, T, D, this.w('model.norm.weight'), eps);
    const lmHead = this.w('lm_head.weight');
    const logits = matmul(nf.y, T, D, lmHead, V);
    let loss = 0;
    let correct = 0;
    const dLogits = new Float64Array(T * V);
    seq.targets.forEach((t, r) => {
      const o = r * V;
      const label = ids[t + 1];
      let max = -Infinity;
      let arg = 0;
      for (let c = 0; c < V; c++) if (logits[o + c] > max) [max, arg] = [logits[o + c], c];
      const weight = seq.weights?.[r] ?? 1;
      if (arg === label) correct += weight;
      let sum = 0;
      for (let c = 0; c < V; c++) sum += Math.exp(logits[o + c] - max);
      loss += weight * (Math.log(sum) + max - logits[o + label]);
      for (let c = 0; c < V; c++) dLogits[o + c] = (weight * Math.exp(logits[o + c] - max)) / sum;
      dLogits[o + label] -= weight;
    });

    // ---- backward ----
    accumulateOuter(g('lm_head.weight'), nf.y, T, D, dLogits, V);
    const dnf = matmulT(dLogits, T, V, lmHead, D);
    const dxT = new Float64Array(T * D);
    rmsNormBackward(dnf, xT, nf.inv, T, D, this.w('model.norm.weight'), dxT, g('model.norm.weight'));
    let dx: Vec = new Float64Array(S * D);
    seq.targets.forEach((t, r) => {
      for (let d = 0; d < D; d++) dx[t * D + d] += dxT[r * D + d];
    });

    for (let l = L - 1; l >= 0; l--) {
      const p = `model.layers.${l}`;
      const c = caches[l];
      // MLP branch: xOut = xMid + act·Wd
      const dAct = matmulT(dx, S, D, this.w(`${p}.mlp.down_proj.weight`), F);
      accumulateOuter(g(`${p}.mlp.down_proj.weight`), c.act, S, F, dx, D);
      const dGate = new Float64Array(S * F);
      const dUp = new Float64Array(S * F);
      for (let i = 0; i < dAct.length; i++) {
        const z = c.gate[i];
        const sig = 1 / (1 + Math.exp(-z));
        dUp[i] = dAct[i] * z * sig;
        dGate[i] = dAct[i] * c.up[i] * sig * (1 + z * (1 - sig));
      }
      accumulateOuter(g(`${p}.mlp.gate_proj.weight`), c.h2, S, D, dGate, F);
      accumulateOuter(g(`${p}.mlp.up_proj.weight`), c.h2, S, D, dUp, F);
      const dh2 = matmulT(dGate, S, F, this.w(`${p}.mlp.gate_proj.weight`), D);
      const dh2b = matmulT(dUp, S, F, this.w(`${p}.mlp.up_proj.weight`), D);
      for (let i = 0; i < dh2.length; i++) dh2[i] += dh2b[i];
      const dxMid = dx.slice();
      rmsNormBackward(dh2, c.xMid, c.inv2, S, D, this.w(`${p}.post_attention_layernorm.weight`), dxMid, g(`${p}.post_attention_layernorm.weight`));

      // Attention branch: xMid = xIn + ctx·Wo
      const dCtx = matmulT(dxMid, S, D, this.w(`${p}.self_attn.o_proj.weight`), D);
      accumulateOuter(g(`${p}.self_attn.o_proj.weight`), c.ctx, S, D, dxMid, D);
      const dq = new Float64Array(S * D);
      const dk = new Float64Array(S * D);
      const dv = new Float64Array(S * D);
      const dP = new Float64Array(S);
      for (let h = 0; h < H; h++) {
        const o = h * hd;
        for (let s = 0; s < S; s++) {
          const row = (h * S + s) * S;
          if (zeroRow(dCtx, s, D)) continue;
          let dot = 0;
          for (let j = 0; j <= s; j++) {
            let a = 0;
            for (let d = 0; d < hd; d++) a += dCtx[s * D + o + d] * c.v[j * D + o + d];
            dP[j] = a;
            dot += c.p[row + j] * a;
          }
          for (let j = 0; j <= s; j++) {
            const pj = c.p[row + j];
            const ds = pj * (dP[j] - dot);
            for (let d = 0; d < hd; d++) {
              dv[j * D + o + d] += pj * dCtx[s * D + o + d];
              dq[s * D + o + d] += ds * c.k[j * D + o + d];
              dk[j * D + o + d] += ds * c.q[s * D + o + d];
            }
          }
        }
      }
      for (let i = 0; i < dq.length; i++) dq[i] *= scale;
      rotate(dq, S, H, hd, rope, true);
      rotate(dk, S, H, hd, rope, true);
      accumulateOuter(g(`${p}.self_attn.q_proj.weight`), c.h, S, D, dq, D);
      accumulateOuter(g(`${p}.self_attn.k_proj.weight`), c.h, S, D, dk, D);
      accumulateOuter(g(`${p}.self_attn.v_proj.weight`), c.h, S, D, dv, D);
      const dh = matmulT(dq, S, D, this.w(`${p}.self_attn.q_proj.weight`), D);
      const dhk = matmulT(dk, S, D, this.w(`${p}.self_attn.k_proj.weight`), D);
      const dhv = matmulT(dv, S, D, this.w(`${p}.self_attn.v_proj.weight`), D);
      for (let i = 0; i < dh.length; i++) dh[i] += dhk[i] + dhv[i];
      const dxIn = dxMid.slice();
      rmsNormBackward(dh, c.xIn, c.inv1, S, D, this.w(`${p}.input_layernorm.weight`), dxIn, g(`${p}.input_layernorm.weight`));
      dx = dxIn;
    }
    const dEmbed = g('model.embed_tokens.weight');
    for (let s = 0; s < S; s++) for (let d = 0; d < D; d++) dEmbed[ids[s] * D + d] += dx[s * D + d];
    return { loss, correct };
  }

  /** The summed cross-entropy alone (for finite-difference checks): the same forward, gradients discarded. */
  loss(seq: LossSequence): number {
    return this.accumulate(seq, this.zeroGradients()).loss;
  }
}
