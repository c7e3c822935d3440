/**
 * The decoder's loss and its gradient in plain TypeScript: the forward pass of trainer/engine/model/build-decoder.ts
 * for every family it builds (RMSNorm, rotary positions with Llama 3 scaling, causal attention with grouped
 * KV heads and head_dim apart from hidden/heads, Qwen2/Llama q/k/v/o biases, Qwen3 per-head q/k norms,
 * Gemma's scaled embeddings, (1 + w) norms and GELU, a SwiGLU MLP, a tied or untied LM head) kept with its
 * activations, then a hand-written backward pass. Pretraining (supervised imitation) and GRPO use it, so
 * no autodiff dependency is needed; test/demo/decoder-gradient.test.ts checks every tensor's gradient of
 * every family against central finite differences and the loss against the reference forward pass.
 *
 * Arithmetic is float64 throughout (weights are read from their float32 arrays). The forward and backward
 * passes stay in one method past 300 lines of file because each backward step mirrors a forward step.
 */
import { architecture, headDim, kvHeads, rotaryInverseFrequencies, type Architecture, type ModelConfig } from '../../engine/model/config.ts';
import type { NamedTensor } from '../../engine/onnx/named-tensor.ts';
import {
  accumulateColumns,
  accumulateOuter,
  addBias,
  geluTanh,
  matmul,
  matmulT,
  rmsNormBackward,
  rmsNormForward,
  rotate,
  rotaryTables,
  silu,
  zeroRow,
  type GatedActivation,
  type GradientBuffer,
  type GradientDtype,
  type Vec,
} from './gradient-kernels.ts';

/** One training sequence: token ids, and which positions' next-token predictions count towards the loss. */
export interface LossSequence {
  ids: readonly number[];
  /** Position t predicts ids[t + 1]; only targets listed here are scored (each in 0..ids.length-2). */
  targets: readonly number[];
  /** Weight of each target's cross-entropy in the loss (default 1 each), aligned with `targets`. */
  weights?: readonly number[];
}

interface LayerCache {
  xIn: Vec; // [S, D] residual stream entering the layer
  inv1: Vec; // [S] 1/rms of xIn
  h: Vec; // [S, D]
  qRaw: Vec; // [S, H·hd] projected, before the q norm (the same array as q without one)
  qInv: Vec; // [S·H] 1/rms of each head of qRaw (q norm only)
  kRaw: Vec; // [S, KV·hd]
  kInv: Vec; // [S·KV]
  q: Vec; // [S, H·hd] normed, rotated and scaled
  k: Vec; // [S, KV·hd] normed and rotated
  v: Vec; // [S, KV·hd]
  p: Vec; // [H, S, S] attention probabilities (row s, keys j ≤ s)
  ctx: Vec; // [S, H·hd]
  xMid: Vec; // [S, D] after the attention residual
  inv2: Vec; // [S]
  h2: Vec; // [S, D]
  gate: Vec; // [S, F]
  up: Vec; // [S, F]
  act: Vec; // [S, F]
}

export class DecoderGradient {
  private readonly byName: Map<string, NamedTensor>;
  private readonly arch: Architecture;
  private readonly D: number;
  private readonly H: number;
  private readonly KV: number;
  private readonly hd: number;
  private readonly F: number;
  private readonly V: number;
  private readonly L: number;
  private readonly eps: number;
  /** Gemma's norms scale by (1 + w). */
  private readonly normOffset: number;
  /** Gemma multiplies embeddings by √hidden. */
  private readonly embedScale: number;
  private readonly activation: GatedActivation;
  /** The graph's float32 /rotary/inv_freq values. */
  private readonly inverseFrequencies: Float64Array;

  constructor(
    readonly config: ModelConfig,
    readonly weights: readonly NamedTensor[],
  ) {
    this.byName = new Map(weights.map((w) => [w.name, w]));
    this.arch = architecture(config);
    this.D = config.hidden_size;
    this.H = config.num_attention_heads;
    this.KV = kvHeads(config);
    this.hd = headDim(config);
    this.F = config.intermediate_size ?? 4 * this.D;
    this.V = config.vocab_size;
    this.L = config.num_hidden_layers;
    this.eps = config.rms_norm_eps ?? (this.arch.gemma ? 1e-6 : 1e-5);
    this.normOffset = this.arch.gemma ? 1 : 0;
    this.embedScale = this.arch.gemma ? Math.sqrt(this.D) : 1;
    this.activation = this.arch.gemma ? geluTanh : silu;
    this.inverseFrequencies = rotaryInverseFrequencies(config).map(Math.fround);
    if (this.H % this.KV !== 0) throw new Error(`config.json: num_attention_heads ${this.H} is not a multiple of num_key_value_heads ${this.KV}`);
    if (this.hd % 2 !== 0) throw new Error(`config.json: head_dim ${this.hd} is odd (rotary positions rotate halves)`);
    for (const name of this.tensorNames()) this.w(name);
  }

  /** Every tensor the forward pass reads: a missing one is named at construction, not mid-step. */
  private tensorNames(): string[] {
    const a = this.arch;
    const names = ['model.embed_tokens.weight', 'model.norm.weight', ...(a.tied ? [] : ['lm_head.weight'])];
    for (let l = 0; l < this.L; l++) {
      const p = `model.layers.${l}`;
      names.push(`${p}.input_layernorm.weight`, `${p}.post_attention_layernorm.weight`, `${p}.mlp.gate_proj.weight`, `${p}.mlp.up_proj.weight`, `${p}.mlp.down_proj.weight`);
      for (const m of ['q', 'k', 'v', 'o']) names.push(`${p}.self_attn.${m}_proj.weight`);
      if (a.qkvBias) for (const m of ['q', 'k', 'v']) names.push(`${p}.self_attn.${m}_proj.bias`);
      if (a.oBias) names.push(`${p}.self_attn.o_proj.bias`);
      if (a.qkNorm) names.push(`${p}.self_attn.q_norm.weight`, `${p}.self_attn.k_norm.weight`);
    }
    return names;
  }

  private w(name: string): Float32Array {
    const t = this.byName.get(name);
    if (!t) throw new Error(`weights: missing tensor "${name}"`);
    return t.data;
  }

  /** Zeroed gradient buffers, one per weight, in the weights' order (float32 halves their memory). */
  zeroGradients(dtype: GradientDtype = 'float64'): GradientBuffer[] {
    return this.weights.map((t) => (dtype === 'float32' ? new Float32Array(t.data.length) : new Float64Array(t.data.length)));
  }

  /**
   * Adds the gradient of this sequence's weighted summed cross-entropy (natural log, over its targets) into `grads`
   * (aligned with the weights; null: the forward pass only) and returns that loss, the summed weight of the
   * targets the argmax got right, and each target's log-probability of its label.
   */
  accumulate(seq: LossSequence, grads: GradientBuffer[] | null): { loss: number; correct: number; logProbs: number[] } {
    const { D, H, KV, hd, F, V, L, eps, normOffset: off, arch: a } = this;
    const QD = H * hd;
    const KD = KV * hd;
    const group = H / KV;
    const ids = seq.ids;
    const S = ids.length;
    for (const t of seq.targets) if (!Number.isInteger(t) || t < 0 || t >= S - 1) throw new RangeError(`target position ${t} is outside 0..${S - 2}`);
    if (seq.weights && seq.weights.length !== seq.targets.length) throw new RangeError(`${seq.weights.length} weights for ${seq.targets.length} targets`);
    const gradOf = new Map(grads ? this.weights.map((t, i) => [t.name, grads[i]]) : []);
    const g = (name: string) => gradOf.get(name)!;
    const rope = rotaryTables(S, this.inverseFrequencies);
    const scale = 1 / Math.sqrt(hd);

    // ---- forward ----
    const embed = this.w('model.embed_tokens.weight');
    let x: Vec = new Float64Array(S * D);
    for (let s = 0; s < S; s++) for (let d = 0; d < D; d++) x[s * D + d] = embed[ids[s] * D + d] * this.embedScale;
    const caches: LayerCache[] = [];
    // The last layer's rows before the first scored position reach the loss only through its keys and
    // values: its queries, attention output and MLP are computed from that row on (the rest stay zero,
    // and the backward pass skips rows whose gradient is zero).
    const firstTarget = seq.targets.length ? Math.min(...seq.targets) : S;
    for (let l = 0; l < L; l++) {
      const p = `model.layers.${l}`;
      const from = l === L - 1 ? firstTarget : 0;
      const n1 = rmsNormForward(x, S, D, this.w(`${p}.input_layernorm.weight`), eps, off);
      const qRaw = matmul(n1.y, S, D, this.w(`${p}.self_attn.q_proj.weight`), QD, from);
      const kRaw = matmul(n1.y, S, D, this.w(`${p}.self_attn.k_proj.weight`), KD);
      const v = matmul(n1.y, S, D, this.w(`${p}.self_attn.v_proj.weight`), KD);
      if (a.qkvBias) {
        addBias(qRaw, S, this.w(`${p}.self_attn.q_proj.bias`), QD, from);
        addBias(kRaw, S, this.w(`${p}.self_attn.k_proj.bias`), KD);
        addBias(v, S, this.w(`${p}.self_attn.v_proj.bias`), KD);
      }
      // Qwen3 normalises each head of q and k (rows of width head_dim) before the rotary positions.
      const qn = a.qkNorm ? rmsNormForward(qRaw, S * H, hd, this.w(`${p}.self_attn.q_norm.weight`), eps, off, from * H) : null;
      const kn = a.qkNorm ? rmsNormForward(kRaw, S * KV, hd, this.w(`${p}.self_attn.k_norm.weight`), eps, off) : null;
      const q = qn ? qn.y : qRaw;
      const k = kn ? kn.y : kRaw;
      rotate(q, S, H, hd, rope, false);
      rotate(k, S, KV, hd, rope, false);
      for (let i = 0; i < q.length; i++) q[i] *= scale;
      const probs = new Float64Array(H * S * S);
      const ctx = new Float64Array(S * QD);
      for (let h = 0; h < H; h++) {
        const o = h * hd;
        // grouped-query attention: query head h reads key/value head ⌊h / (H / KV)⌋
        const ko = Math.floor(h / group) * hd;
        for (let s = from; s < S; s++) {
          const row = (h * S + s) * S;
          let max = -Infinity;
          for (let j = 0; j <= s; j++) {
            let dot = 0;
            for (let d = 0; d < hd; d++) dot += q[s * QD + o + d] * k[j * KD + ko + d];
            probs[row + j] = dot;
            if (dot > max) max = dot;
          }
          let sum = 0;
          for (let j = 0; j <= s; j++) sum += probs[row + j] = Math.exp(probs[row + j] - max);
          for (let j = 0; j <= s; j++) {
            const pj = (probs[row + j] /= sum);
            for (let d = 0; d < hd; d++) ctx[s * QD + o + d] += pj * v[j * KD + ko + d];
          }
        }
      }
      const attnOut = matmul(ctx, S, QD, this.w(`${p}.self_attn.o_proj.weight`), D, from);
      if (a.oBias) addBias(attnOut, S, this.w(`${p}.self_attn.o_proj.bias`), D, from);
      const xMid = new Float64Array(S * D);
      for (let i = from * D; i < xMid.length; i++) xMid[i] = x[i] + attnOut[i];
      const n2 = rmsNormForward(xMid, S, D, this.w(`${p}.post_attention_layernorm.weight`), eps, off, from);
      const gate = matmul(n2.y, S, D, this.w(`${p}.mlp.gate_proj.weight`), F, from);
      const up = matmul(n2.y, S, D, this.w(`${p}.mlp.up_proj.weight`), F, from);
      const act = this.activation.forward(gate, up, from * F);
      const mlpOut = matmul(act, S, F, this.w(`${p}.mlp.down_proj.weight`), D, from);
      const xOut = new Float64Array(S * D);
      for (let i = from * D; i < xOut.length; i++) xOut[i] = xMid[i] + mlpOut[i];
      caches.push({ xIn: x, inv1: n1.inv, h: n1.y, qRaw, qInv: qn?.inv ?? new Float64Array(0), kRaw, kInv: kn?.inv ?? new Float64Array(0), q, k, v, p: probs, ctx, xMid, inv2: n2.inv, h2: n2.y, gate, up, act });
      x = xOut;
    }

    // The head runs on the scored positions only: nothing else reaches the loss.
    const T = seq.targets.length;
    const xT = new Float64Array(T * D);
    seq.targets.forEach((t, r) => xT.set(x.subarray(t * D, (t + 1) * D), r * D));
    const nf = rmsNormForward(xT, T, D, this.w('model.norm.weight'), eps, off);
    // A tied head reads the embedding table [V, D] row by row; an untied one is [D, V].
    const head = a.tied ? embed : this.w('lm_head.weight');
    const logits = a.tied ? matmulT(nf.y, T, D, head, V) : matmul(nf.y, T, D, head, V);
    let loss = 0;
    let correct = 0;
    const logProbs: number[] = [];
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
      logProbs.push(logits[o + label] - max - Math.log(sum));
      loss += weight * (Math.log(sum) + max - logits[o + label]);
      for (let c = 0; c < V; c++) dLogits[o + c] = (weight * Math.exp(logits[o + c] - max)) / sum;
      dLogits[o + label] -= weight;
    });

    if (!grads) return { loss, correct, logProbs };

    // ---- backward ----
    let dnf: Vec;
    if (a.tied) {
      accumulateOuter(g('model.embed_tokens.weight'), dLogits, T, V, nf.y, D);
      dnf = matmul(dLogits, T, V, head, D);
    } else {
      accumulateOuter(g('lm_head.weight'), nf.y, T, D, dLogits, V);
      dnf = matmulT(dLogits, T, V, head, D);
    }
    const dxT = new Float64Array(T * D);
    rmsNormBackward(dnf, xT, nf.inv, T, D, this.w('model.norm.weight'), off, dxT, g('model.norm.weight'));
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
      const { dGate, dUp } = this.activation.backward(dAct, c.gate, c.up);
      accumulateOuter(g(`${p}.mlp.gate_proj.weight`), c.h2, S, D, dGate, F);
      accumulateOuter(g(`${p}.mlp.up_proj.weight`), c.h2, S, D, dUp, F);
      const dh2 = matmulT(dGate, S, F, this.w(`${p}.mlp.gate_proj.weight`), D);
      const dh2b = matmulT(dUp, S, F, this.w(`${p}.mlp.up_proj.weight`), D);
      for (let i = 0; i < dh2.length; i++) dh2[i] += dh2b[i];
      const dxMid = dx.slice();
      rmsNormBackward(dh2, c.xMid, c.inv2, S, D, this.w(`${p}.post_attention_layernorm.weight`), off, dxMid, g(`${p}.post_attention_layernorm.weight`));

      // Attention branch: xMid = xIn + ctx·Wo (+ bo)
      const dCtx = matmulT(dxMid, S, D, this.w(`${p}.self_attn.o_proj.weight`), QD);
      accumulateOuter(g(`${p}.self_attn.o_proj.weight`), c.ctx, S, QD, dxMid, D);
      if (a.oBias) accumulateColumns(g(`${p}.self_attn.o_proj.bias`), dxMid, S, D);
      const dq = new Float64Array(S * QD);
      const dk = new Float64Array(S * KD);
      const dv = new Float64Array(S * KD);
      const dP = new Float64Array(S);
      for (let h = 0; h < H; h++) {
        const o = h * hd;
        const ko = Math.floor(h / group) * hd;
        for (let s = 0; s < S; s++) {
          const row = (h * S + s) * S;
          if (zeroRow(dCtx, s, QD)) continue;
          let dot = 0;
          for (let j = 0; j <= s; j++) {
            let acc = 0;
            for (let d = 0; d < hd; d++) acc += dCtx[s * QD + o + d] * c.v[j * KD + ko + d];
            dP[j] = acc;
            dot += c.p[row + j] * acc;
          }
          for (let j = 0; j <= s; j++) {
            const pj = c.p[row + j];
            const ds = pj * (dP[j] - dot);
            for (let d = 0; d < hd; d++) {
              dv[j * KD + ko + d] += pj * dCtx[s * QD + o + d];
              dq[s * QD + o + d] += ds * c.k[j * KD + ko + d];
              dk[j * KD + ko + d] += ds * c.q[s * QD + o + d];
            }
          }
        }
      }
      for (let i = 0; i < dq.length; i++) dq[i] *= scale;
      rotate(dq, S, H, hd, rope, true);
      rotate(dk, S, KV, hd, rope, true);
      let dqRaw = dq;
      let dkRaw = dk;
      if (a.qkNorm) {
        dqRaw = new Float64Array(S * QD);
        dkRaw = new Float64Array(S * KD);
        rmsNormBackward(dq, c.qRaw, c.qInv, S * H, hd, this.w(`${p}.self_attn.q_norm.weight`), off, dqRaw, g(`${p}.self_attn.q_norm.weight`));
        rmsNormBackward(dk, c.kRaw, c.kInv, S * KV, hd, this.w(`${p}.self_attn.k_norm.weight`), off, dkRaw, g(`${p}.self_attn.k_norm.weight`));
      }
      accumulateOuter(g(`${p}.self_attn.q_proj.weight`), c.h, S, D, dqRaw, QD);
      accumulateOuter(g(`${p}.self_attn.k_proj.weight`), c.h, S, D, dkRaw, KD);
      accumulateOuter(g(`${p}.self_attn.v_proj.weight`), c.h, S, D, dv, KD);
      if (a.qkvBias) {
        accumulateColumns(g(`${p}.self_attn.q_proj.bias`), dqRaw, S, QD);
        accumulateColumns(g(`${p}.self_attn.k_proj.bias`), dkRaw, S, KD);
        accumulateColumns(g(`${p}.self_attn.v_proj.bias`), dv, S, KD);
      }
      const dh = matmulT(dqRaw, S, QD, this.w(`${p}.self_attn.q_proj.weight`), D);
      const dhk = matmulT(dkRaw, S, KD, this.w(`${p}.self_attn.k_proj.weight`), D);
      const dhv = matmulT(dv, S, KD, this.w(`${p}.self_attn.v_proj.weight`), D);
      for (let i = 0; i < dh.length; i++) dh[i] += dhk[i] + dhv[i];
      const dxIn = dxMid.slice();
      rmsNormBackward(dh, c.xIn, c.inv1, S, D, this.w(`${p}.input_layernorm.weight`), off, dxIn, g(`${p}.input_layernorm.weight`));
      dx = dxIn;
    }
    const dEmbed = g('model.embed_tokens.weight');
    for (let s = 0; s < S; s++) for (let d = 0; d < D; d++) dEmbed[ids[s] * D + d] += dx[s * D + d] * this.embedScale;
    return { loss, correct, logProbs };
  }

  /** The summed cross-entropy alone (finite-difference checks): the forward pass only. */
  loss(seq: LossSequence): number {
    return this.accumulate(seq, null).loss;
  }

  /** log p(ids[t + 1] | ids[0..t]) at each target t, under the model's full softmax. */
  logProbs(seq: LossSequence): number[] {
    return this.accumulate(seq, null).logProbs;
  }
}
