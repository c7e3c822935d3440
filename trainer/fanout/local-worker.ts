/**
 * One worker process of the local pool: the Episode function's own handler (functions/episode.ts),
 * fed over IPC instead of by Lambda. The parent kills this process to cancel or time out an episode,
 * which is the only cancellation that also stops a runaway environment.
 */
import { z } from 'zod';
import { createEpisodeHandler } from '../../functions/episode.ts';
import { openStore, StoreSpec } from '../../shared/store/store-spec.ts';
import { WorkerMessage, type WorkerReply } from './local-protocol.ts';
import { measuredPrices } from './measured-prices.ts';
import { EMBEDDED_OUTBOUND, outboundPolicyFromEnv } from '../../environments/outbound/address-policy.ts';

const spec = StoreSpec.parse(JSON.parse(process.env.ESOPT_WORKER_STORE ?? 'null'));
const memoryMb = z.coerce.number().min(0).parse(process.env.ESOPT_WORKER_MEMORY_MB ?? '0');
const handle = createEpisodeHandler({
prices: measuredPrices(),
  store: openStore(spec),
  env: process.env,
  memoryMb,
  billedPerInvocation: false,
  // An embedded run: endpoints on this machine too, and the commands its config file names (the HTTP API refuses
  // commands at the door, so they come only from a file the user wrote).
  environmentContext: { outbound: outboundPolicyFromEnv(process.env, EMBEDDED_OUTBOUND), allowCommands: true },
  environmentKeysFromEnv: true,
  // Quiet unless asked: a pool of chatty workers would drown the CLI's own output.
  log: process.env.ESOPT_WORKER_LOG === '1' ? undefined : { info() {}, error: (fields, message) => console.error(message, fields) },
});

process.on('message', async (raw) => {
  const message = WorkerMessage.parse(raw);
  let reply: WorkerReply;
  try {
    reply = { id: message.id, response: await handle(message.event) };
  } catch (err) {
    reply = { id: message.id, crash: (err as Error).stack ?? String(err) };
  }
  process.send?.(reply);
});
process.send?.({ ready: true });
