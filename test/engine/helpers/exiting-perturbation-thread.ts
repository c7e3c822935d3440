/** A perturbation thread that dies on its first job, holding the tensors it was lent (a crash, for the pool's tests). */
import { parentPort } from 'node:worker_threads';

parentPort?.on('message', () => process.exit(3));
parentPort?.postMessage({ ready: true });
