/**
 * The fuzz past the door, on the box: near-valid run bodies (and the probes: a target pattern that
 * backtracks exponentially in V8, a horizon of 100,000 iterations) are posted to the local API,
 * whose embedded box runs what it accepts in its own process. For a bounded time while they run, /healthz is
 * asked every 100 ms and must answer within a second each time; then every accepted run is stopped and must
 * end visibly (stopped, finished or failed), none left `running`.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { RunDetail } from '../../shared/schemas/index.ts';
import { startTestApi, tinyRunConfig, waitFor, type TestApi } from '../api/helpers.ts';
import { bodyText, fuzzBody, type Json } from './helpers/fuzz-bodies.ts';

/** How many accepted runs train at once on this 2-core machine; the rest are stopped as soon as they are accepted. */
const TRAINING = 4;
const RUN_FOR_MS = 6000;
let api: TestApi;

beforeAll(async () => {
  api = await startTestApi();
});
afterAll(async () => {
  await api?.dispose();
});

it('runs what it accepted while /healthz answers within a second, and every accepted run ends visibly', async () => {
  const valid = tinyRunConfig({ iterations: 50, evalInterval: 50 }) as unknown as Json;
  const probes = [
    tinyRunConfig({ name: 'backtracking-target', iterations: 50, targets: { include: ['^([a-z0-9_.]+)+!'] } }),
    // Long, not wide: a stop is honoured after the iteration in flight, so an iteration must end within the wait below.
    tinyRunConfig({ name: 'long-horizon', iterations: 100_000, es: { population: 8, sigma: 0.02, alpha: 0.01 } }),
  ];
  const bodies = [...probes.map((p) => JSON.stringify(p)), ...fc.sample(fuzzBody(valid), { numRuns: 40, seed: 45 }).map(bodyText)];

  const latencies: number[] = [];
  let probing = true;
  const prober = (async () => {
    while (probing) {
      const started = performance.now();
      const res = await fetch(`${api.url}/healthz`, { signal: AbortSignal.timeout(5000) });
      latencies.push(performance.now() - started);
      expect(res.status).toBe(200);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();

  const accepted: string[] = [];
  const statuses = new Map<number, number>();
  try {
    for (const body of bodies) {
      const res = await api.call('POST', '/runs', { body });
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      expect(res.status, body.slice(0, 300)).toBeLessThan(500);
      if (res.status !== 201) continue;
      accepted.push(res.body.id);
      if (accepted.length > TRAINING) expect((await api.call('POST', `/runs/${res.body.id}/stop`)).status).toBe(202);
    }
    expect(accepted.length).toBeGreaterThanOrEqual(2);
    await new Promise((r) => setTimeout(r, RUN_FOR_MS));
    for (const id of accepted.slice(0, TRAINING)) expect([202, 409]).toContain((await api.call('POST', `/runs/${id}/stop`)).status);
    for (const id of accepted) {
      await waitFor(async () => {
        const state = RunDetail.parse((await api.call('GET', `/runs/${id}`)).body).state;
        return ['stopped', 'finished', 'failed'].includes(state) ? state : undefined;
      }, 60_000, `run ${id} to end`);
    }
  } finally {
    probing = false;
    await prober;
  }
  expect(latencies.length).toBeGreaterThan(RUN_FOR_MS / 200);
  expect(Math.max(...latencies)).toBeLessThan(1000);
}, 120_000);
