/**
 * `npx tsx scripts/device-noise-stream.ts [--mixer v1|draft] [--layout consecutive|members] [--members 8]
 * [--run-seed 1]`: writes the device noise definition's mixed words (shared/device-noise.ts) to stdout as raw
 * little-endian uint32, without end, for a statistical battery (`… | dieharder -a -g 200`).
 *   consecutive  h0, h1 of elements 0, 1, 2, … of member 0's stream (iteration 0), block after block
 *   members      element by element, h0, h1 of members 0 … M−1 interleaved: a weakness between members'
 *                streams shows as one between neighbouring words
 * `--mixer draft` streams the retired draft mixer (scripts/device-noise-draft.ts) for comparison.
 */
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { BLOCK, deviceNoiseKeys, deviceNoiseWords } from '../shared/device-noise.ts';
import { draftDeviceNoiseWords } from './device-noise-draft.ts';

const Args = z.object({
  mixer: z.enum(['v1', 'draft']),
  layout: z.enum(['consecutive', 'members']),
  members: z.coerce.number().int().min(1).max(1024),
  'run-seed': z.coerce.number().int().min(0).max(0xffffffff),
});

const { values } = parseArgs({
  options: { mixer: { type: 'string', default: 'v1' }, layout: { type: 'string', default: 'consecutive' }, members: { type: 'string', default: '8' }, 'run-seed': { type: 'string', default: '1' } },
});
const parsed = Args.safeParse(values);
if (!parsed.success) {
  console.error(parsed.error.issues.map((i) => `--${i.path.join('.')}: ${i.message}`).join('\n'));
  process.exit(2);
}
const args = parsed.data;
const words = args.mixer === 'v1' ? deviceNoiseWords : draftDeviceNoiseWords;
const members = args.layout === 'members' ? args.members : 1;

process.stdout.on('error', (err: NodeJS.ErrnoException) => process.exit(err.code === 'EPIPE' ? 0 : 1));

const CHUNK = 1 << 16; // elements per write
for (let block = 0; ; block++) {
  const keys = Array.from({ length: members }, (_, member) => deviceNoiseKeys({ runSeed: args['run-seed'], iteration: 0, member }, block));
  for (let from = 0; from < BLOCK; from += CHUNK) {
    const out = new Uint32Array(CHUNK * members * 2);
    for (let j = 0, w = 0; j < CHUNK; j++) {
      for (const [k0, k1] of keys) {
        const [h0, h1] = words(from + j, k0, k1);
        out[w++] = h0;
        out[w++] = h1;
      }
    }
    // a Uint32Array's bytes are little-endian on the platforms this runs on (x86-64, arm64)
    if (!process.stdout.write(new Uint8Array(out.buffer))) await new Promise((r) => process.stdout.once('drain', r));
  }
}
