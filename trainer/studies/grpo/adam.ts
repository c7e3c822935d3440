/**
 * Adam with bias correction, updating float32 weights in place (GRPO's optimiser). Its moments are float64
 * (the default, which every committed GRPO run used) or float32, as PyTorch keeps them (half the memory).
 */
import type { GradientBuffer, GradientDtype } from '../pretrain/gradient-kernels.ts';

const BETA1 = 0.9;
const BETA2 = 0.999;
const EPSILON = 1e-8;

export class Adam {
  private readonly m: GradientBuffer[];
  private readonly v: GradientBuffer[];
  private t = 0;

  constructor(
    private readonly params: readonly Float32Array[],
    private readonly learningRate: number,
    readonly dtype: GradientDtype = 'float64',
  ) {
    const zeros = (n: number) => (dtype === 'float32' ? new Float32Array(n) : new Float64Array(n));
    this.m = params.map((p) => zeros(p.length));
    this.v = params.map((p) => zeros(p.length));
  }

  /** θ ← θ − lr · m̂ / (√v̂ + ε) for gradients aligned with the parameters. */
  step(grads: readonly GradientBuffer[]): void {
    if (grads.length !== this.params.length) throw new RangeError(`${grads.length} gradients for ${this.params.length} parameters`);
    this.t++;
    const c1 = 1 - BETA1 ** this.t;
    const c2 = 1 - BETA2 ** this.t;
    this.params.forEach((p, k) => {
      const g = grads[k];
      const m = this.m[k];
      const v = this.v[k];
      for (let i = 0; i < p.length; i++) {
        m[i] = BETA1 * m[i] + (1 - BETA1) * g[i];
        v[i] = BETA2 * v[i] + (1 - BETA2) * g[i] * g[i];
        p[i] -= (this.learningRate * (m[i] / c1)) / (Math.sqrt(v[i] / c2) + EPSILON);
      }
    });
  }
}
