/**
 * `startLocalCloud` in a process of its own, so a benchmark's trainer process does only the trainer's
 * work (dispatch and collection) and its CPU time can be measured apart from the handler's and
 * s3rver's. Takes the faults as JSON in argv[2], prints one line of JSON with the endpoints when ready,
 * and exits when its stdin closes (the parent died or is done).
 */
import { startLocalCloud } from './local-cloud.ts';
import { InvokeFaults } from './invoke-faults.ts';

const faults = InvokeFaults.parse(JSON.parse(process.argv[2] ?? '{}'));
const cloud = await startLocalCloud({ faults });
process.stdout.write(`${JSON.stringify({ invokeUrl: cloud.invoke.url, storeConfig: cloud.s3.storeConfig })}\n`);
process.stdin.resume();
process.stdin.on('end', async () => {
  await cloud.close();
  process.exit(0);
});
