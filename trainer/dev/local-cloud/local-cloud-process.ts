/**
 * One part of the local cloud in a process of its own, so a benchmark's trainer process does only the
 * trainer's work (dispatch and collection) and its CPU time can be measured apart; and so s3rver and
 * the Episode handler, which both run flat out while a 1,000-episode iteration lands, each get a core
 * instead of sharing one event loop.
 *
 *   local-cloud-process.ts s3                      s3rver (with its per-object middleware)
 *   local-cloud-process.ts invoke FAULTS STORE     the invoke endpoint + Episode handler, writing to STORE
 *
 * FAULTS and STORE are JSON (InvokeFaults, S3StoreConfig); episodes are priced as `esopt dev cloud` prices them
 * (the measured prices), the stack's ESOPT_COST_PRICES being absent here. Prints one line of JSON when ready
 * (`{"storeConfig": …}` or `{"invokeUrl": …}`) and exits when its stdin closes (the parent died or is done).
 */
import { S3StoreConfig } from '../../../shared/store/s3.ts';
import { measuredPrices } from '../../fanout/measured-prices.ts';
import { InvokeFaults } from './invoke-faults.ts';
import { startEpisodeEndpoint } from './local-cloud.ts';
import { startLocalS3 } from './s3-server.ts';

const [role, faultsJson, storeJson] = process.argv.slice(2);

async function start(): Promise<{ ready: object; close(): Promise<void> }> {
  if (role === 's3') {
    const s3 = await startLocalS3('esopt-dev-cloud');
    return { ready: { storeConfig: s3.storeConfig }, close: () => s3.close() };
  }
  if (role === 'invoke') {
    const endpoint = await startEpisodeEndpoint(S3StoreConfig.parse(JSON.parse(storeJson ?? 'null')), { faults: InvokeFaults.parse(JSON.parse(faultsJson ?? '{}')), prices: measuredPrices() });
    return {
      ready: { invokeUrl: endpoint.invoke.url },
      async close() {
        await endpoint.invoke.close();
        endpoint.store.destroy();
      },
    };
  }
  throw new Error(`usage: local-cloud-process.ts s3 | invoke FAULTS_JSON STORE_JSON (got ${JSON.stringify(role)})`);
}

const part = await start();
process.stdout.write(`${JSON.stringify(part.ready)}\n`);
process.stdin.resume();
process.stdin.on('end', async () => {
  await part.close();
  process.exit(0);
});
