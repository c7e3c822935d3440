/**
 * The inference server's metrics in the Prometheus text exposition format (version 0.0.4). A handful of
 * counters, gauges and histograms is all it needs, so they are written out here rather than pulling in a
 * client library.
 */

class Histogram {
  readonly counts: number[];
  sum = 0;
  count = 0;
  constructor(readonly buckets: readonly number[]) {
    this.counts = buckets.map(() => 0);
  }
  observe(v: number): void {
    this.sum += v;
    this.count++;
    this.buckets.forEach((b, i) => {
      if (v <= b) this.counts[i]++;
    });
  }
  lines(name: string): string[] {
    const out = this.buckets.map((b, i) => `${name}_bucket{le="${b}"} ${this.counts[i]}`);
    out.push(`${name}_bucket{le="+Inf"} ${this.count}`, `${name}_sum ${this.sum}`, `${name}_count ${this.count}`);
    return out;
  }
}

/** Tokens per second over a sliding window, so the gauge shows current throughput, not the lifetime mean. */
class Throughput {
  private events: Array<{ at: number; tokens: number }> = [];
  constructor(private readonly windowMs: number) {}
  add(tokens: number, at = Date.now()): void {
    this.events.push({ at, tokens });
    this.trim(at);
  }
  perSecond(at = Date.now()): number {
    this.trim(at);
    const tokens = this.events.reduce((a, e) => a + e.tokens, 0);
    return tokens / (this.windowMs / 1000);
  }
  private trim(at: number): void {
    while (this.events.length > 0 && this.events[0].at < at - this.windowMs) this.events.shift();
  }
}

export class ServerMetrics {
  private readonly requests = new Map<string, number>();
  promptTokens = 0;
  cachedTokens = 0;
  completionTokens = 0;
  memberSwitches = 0;
  batches = 0;
  private readonly batchSize = new Histogram([1, 2, 4, 8, 16, 32, 64, 128]);
  private readonly latency = new Histogram([0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]);
  private readonly throughput = new Throughput(10_000);

  constructor(private readonly queueDepth: () => number) {}

  request(status: number, seconds: number): void {
    const k = String(status);
    this.requests.set(k, (this.requests.get(k) ?? 0) + 1);
    this.latency.observe(seconds);
  }

  /** One engine call: its size, the tokens it made and how many distinct weight states it needed. */
  batch(size: number, promptTokens: number, cachedTokens: number, completionTokens: number, distinctMembers: number): void {
    this.batches++;
    this.batchSize.observe(size);
    this.promptTokens += promptTokens;
    this.cachedTokens += cachedTokens;
    this.completionTokens += completionTokens;
    this.memberSwitches += distinctMembers;
    this.throughput.add(completionTokens);
  }

  render(): string {
    const lines: string[] = [];
    const metric = (name: string, type: string, help: string, body: string[]): void => {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, ...body);
    };
    metric('esopt_requests_total', 'counter', 'Chat completion requests by HTTP status.', [...this.requests.entries()].map(([s, n]) => `esopt_requests_total{status="${s}"} ${n}`));
    metric('esopt_request_duration_seconds', 'histogram', 'Chat completion latency, arrival to last byte.', this.latency.lines('esopt_request_duration_seconds'));
    metric('esopt_prompt_tokens_total', 'counter', 'Prompt tokens processed.', [`esopt_prompt_tokens_total ${this.promptTokens}`]);
    metric('esopt_cached_prompt_tokens_total', 'counter', 'Prompt tokens served from the prefix cache (not prefilled).', [`esopt_cached_prompt_tokens_total ${this.cachedTokens}`]);
    metric('esopt_completion_tokens_total', 'counter', 'Completion tokens generated.', [`esopt_completion_tokens_total ${this.completionTokens}`]);
    metric('esopt_tokens_per_second', 'gauge', 'Completion tokens per second over the last 10 s.', [`esopt_tokens_per_second ${this.throughput.perSecond()}`]);
    metric('esopt_batch_size', 'histogram', 'Rows per engine call.', this.batchSize.lines('esopt_batch_size'));
    metric('esopt_queue_depth', 'gauge', 'Requests waiting for the engine.', [`esopt_queue_depth ${this.queueDepth()}`]);
    metric('esopt_member_switches_total', 'counter', 'Distinct weight states (members) the engine had to run, summed over engine calls.', [`esopt_member_switches_total ${this.memberSwitches}`]);
    return `${lines.join('\n')}\n`;
  }
}
