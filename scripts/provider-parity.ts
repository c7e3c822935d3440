/**
 * `node --import tsx scripts/provider-parity.ts [--provider webgpu] [--model small] [--rows 4] [--new-tokens 32] [--kv-on-host]`:
 * greedy decoding on the provider against the CPU, token for token, in each way the engine serves θ
 * (trainer/studies/bench/provider-parity.ts), the KV caches on the device (--kv-on-host: the host route). Prints the result as JSON; exits 0 when every row is equal,
 * 3 when some differ (where they start is in the JSON), 1 when a provider fails, 2 on bad flags.
 */
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { ExecutionProvider } from '../shared/execution-provider.ts';
import { modelSpecFlag } from '../trainer/engine/model/presets.ts';
import { providerParity } from '../trainer/studies/bench/provider-parity.ts';

const Flags = z.object({
  provider: ExecutionProvider.default('webgpu'),
  model: z.string().min(1).default('small'),
  rows: z.coerce.number().int().min(1).max(64).default(4),
  'new-tokens': z.coerce.number().int().min(1).max(1024).default(32),
  'kv-on-host': z.boolean().default(false),
});

const parsed = Flags.safeParse(parseArgs({ options: { provider: { type: 'string' }, model: { type: 'string' }, rows: { type: 'string' }, 'new-tokens': { type: 'string' }, 'kv-on-host': { type: 'boolean' } } }).values);
if (!parsed.success) {
  process.stderr.write(`provider-parity: ${parsed.error.issues.map((i) => `--${i.path.join('.')}: ${i.message}`).join('; ')}\n`);
  process.exit(2);
}
const f = parsed.data;
try {
  const result = await providerParity({ model: modelSpecFlag(f.model, 0), provider: f.provider, rows: f.rows, newTokens: f['new-tokens'], kvOnDevice: !f['kv-on-host'] });
  process.stdout.write(`${JSON.stringify({ model: f.model, ...result }, null, 2)}\n`);
  process.exitCode = result.equal ? 0 : 3;
} catch (err) {
  process.stderr.write(`provider-parity: ${f.provider} failed: ${(err as Error).message}\n`);
  process.exitCode = 1;
}
