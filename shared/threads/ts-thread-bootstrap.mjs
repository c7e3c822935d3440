// Entry of every TypeScript thread: Node 20 does not apply `--import tsx` to a thread's own entry,
// so this plain-JS file registers tsx first and then loads the real (TypeScript) entry.
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
await import(workerData.entry);
