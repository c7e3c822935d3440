/** Adam with bias correction over float64 moments, updating float32 weights in place (GRPO's optimiser). */
const BETA1 = 0.9;
const BETA2 = 0.999;
const EPSILON = 1e-8;

export class Adam {
  private readonly m: Float64Array[];
  private readonly v: Float64Array[];
  private t = 0;

  constructor(
    private readonly params: readonly Float32Array[],
    private readonly learningRate: number,
  ) {
    this.m = params.map((p) => new Float64Array(p.length));
    this.v = params.map((p) => new Float64Array(p.length));
  }

  /** θ ← θ − lr · m̂ / (√v̂ + ε) for gradients aligned with the parameters. */
  step(grads: readonly Float64Array[]): void {
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
