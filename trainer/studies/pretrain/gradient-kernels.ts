/**
 * The float64 kernels of the decoder gradient (decoder-gradient.ts), each forward beside its backward:
 * row-major matrix products, RMSNorm, rotate-half rotary positions and the MLP activations. Weights are read
 * from their float32 arrays; activations and gradients are float64. Backward kernels skip rows whose
 * upstream gradient is zero (rows no scored position depends on).
 */
export type Vec = Float64Array;

/** A gradient accumulator: float64 (pretraining, GRPO's default) or float32 (GRPO's `stateDtype`). */
export type GradientBuffer = Float64Array | Float32Array;

/** The precisions a gradient (and an optimiser's state beside it) may be kept in. */
export const GRADIENT_DTYPES = ['float64', 'float32'] as const;
export type GradientDtype = (typeof GRADIENT_DTYPES)[number];

/** X [S, n] · W [n, m] → [S, m], rows from `from` on (earlier rows stay zero). */
export function matmul(x: Vec, S: number, n: number, w: Float32Array, m: number, from = 0): Vec {
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

/** Whether row s of a [S, m] matrix is all zero. */
export function zeroRow(x: Vec, s: number, m: number): boolean {
  for (let j = s * m, end = j + m; j < end; j++) if (x[j] !== 0) return false;
  return true;
}

/** dY [S, m] · Wᵀ → [S, n] (W is [n, m]); also a tied head's forward, x against each embedding row. */
export function matmulT(dy: Vec, S: number, m: number, w: Float32Array, n: number): Vec {
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
export function accumulateOuter(dw: GradientBuffer, x: Vec, S: number, n: number, dy: Vec, m: number): void {
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

/** db [m] += Σ_s dY [S, m] (a bias's gradient). */
export function accumulateColumns(db: GradientBuffer, dy: Vec, S: number, m: number): void {
  for (let s = 0; s < S; s++) for (let j = 0; j < m; j++) db[j] += dy[s * m + j];
}

/** In place: adds bias b [m] to rows from `from` on of Y [S, m]. */
export function addBias(y: Vec, S: number, b: Float32Array, m: number, from = 0): void {
  for (let s = from; s < S; s++) for (let j = 0; j < m; j++) y[s * m + j] += b[j];
}

/**
 * RMSNorm over rows of width D: y = x · inv · (offset + g), inv = 1/√(mean(x²) + eps); offset is 1 for
 * Gemma's (1 + w) norms, 0 otherwise. Rows before `from` stay zero.
 */
export function rmsNormForward(x: Vec, rows: number, D: number, g: Float32Array, eps: number, offset: number, from = 0): { y: Vec; inv: Vec } {
  const y = new Float64Array(rows * D);
  const inv = new Float64Array(rows);
  for (let s = from; s < rows; s++) {
    let ms = 0;
    for (let d = 0; d < D; d++) ms += x[s * D + d] ** 2;
    const r = 1 / Math.sqrt(ms / D + eps);
    inv[s] = r;
    for (let d = 0; d < D; d++) y[s * D + d] = x[s * D + d] * r * (offset + g[d]);
  }
  return { y, inv };
}

/** Adds dL/dx into `dx` and dL/dg into `dg` for rmsNormForward's y. */
export function rmsNormBackward(dy: Vec, x: Vec, inv: Vec, rows: number, D: number, g: Float32Array, offset: number, dx: Vec, dg: GradientBuffer): void {
  for (let s = 0; s < rows; s++) {
    const r = inv[s];
    let dot = 0;
    for (let d = 0; d < D; d++) {
      const i = s * D + d;
      dg[d] += dy[i] * x[i] * r;
      dot += dy[i] * (offset + g[d]) * x[i];
    }
    const c = (r * r * r * dot) / D;
    for (let d = 0; d < D; d++) {
      const i = s * D + d;
      dx[i] += r * dy[i] * (offset + g[d]) - x[i] * c;
    }
  }
}

/** Rotate-half rotary tables cos/sin [S, hd/2] for positions 0..S−1 and the given inverse frequencies. */
export function rotaryTables(S: number, inverseFrequencies: ArrayLike<number>): { cos: Vec; sin: Vec } {
  const half = inverseFrequencies.length;
  const cos = new Float64Array(S * half);
  const sin = new Float64Array(S * half);
  for (let s = 0; s < S; s++) {
    for (let i = 0; i < half; i++) {
      const angle = s * inverseFrequencies[i];
      cos[s * half + i] = Math.cos(angle);
      sin[s * half + i] = Math.sin(angle);
    }
  }
  return { cos, sin };
}

/** In place: rotate every head of x [S, heads·hd]; `inverse` applies the transpose (the backward pass). */
export function rotate(x: Vec, S: number, heads: number, hd: number, t: { cos: Vec; sin: Vec }, inverse: boolean): void {
  const half = hd / 2;
  const width = heads * hd;
  for (let s = 0; s < S; s++) {
    for (let h = 0; h < heads; h++) {
      const o = s * width + h * hd;
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

const GELU_C = Math.sqrt(2 / Math.PI);

/**
 * The MLP's gated activation act = f(gate) · up, forward over rows from `from` on and backward into dGate /
 * dUp: SiLU (Llama, Qwen, Mistral) or tanh-approximated GELU (Gemma).
 */
export interface GatedActivation {
  forward(gate: Vec, up: Vec, from: number): Vec;
  backward(dAct: Vec, gate: Vec, up: Vec): { dGate: Vec; dUp: Vec };
}

// Each activation writes its own loops rather than sharing one over (f, f′): SiLU's expressions are the
// ones the committed base agents were pretrained with, and a shared form would round differently.
export const silu: GatedActivation = {
  forward(gate, up, from) {
    const act = new Float64Array(gate.length);
    for (let i = from; i < act.length; i++) act[i] = (gate[i] / (1 + Math.exp(-gate[i]))) * up[i];
    return act;
  },
  backward(dAct, gate, up) {
    const dGate = new Float64Array(gate.length);
    const dUp = new Float64Array(gate.length);
    for (let i = 0; i < dAct.length; i++) {
      const z = gate[i];
      const sig = 1 / (1 + Math.exp(-z));
      dUp[i] = dAct[i] * z * sig;
      dGate[i] = dAct[i] * up[i] * sig * (1 + z * (1 - sig));
    }
    return { dGate, dUp };
  },
};

export const geluTanh: GatedActivation = {
  forward(gate, up, from) {
    const act = new Float64Array(gate.length);
    for (let i = from; i < act.length; i++) {
      const z = gate[i];
      act[i] = 0.5 * z * (1 + Math.tanh(GELU_C * (z + 0.044715 * z ** 3))) * up[i];
    }
    return act;
  },
  backward(dAct, gate, up) {
    const dGate = new Float64Array(gate.length);
    const dUp = new Float64Array(gate.length);
    for (let i = 0; i < dAct.length; i++) {
      const z = gate[i];
      const t = Math.tanh(GELU_C * (z + 0.044715 * z ** 3));
      dUp[i] = dAct[i] * 0.5 * z * (1 + t);
      dGate[i] = dAct[i] * up[i] * (0.5 * (1 + t) + 0.5 * z * (1 - t * t) * GELU_C * (1 + 3 * 0.044715 * z * z));
    }
    return { dGate, dUp };
  },
};
