/**
 * `node --import tsx scripts/lambda-runtime-client.ts`: installs the deploy rehearsal's Lambda runtime client
 * (aws-lambda-ric 3.3.0) into its cache — ESOPT_LAMBDA_RIC_DIR, else ~/.cache/esopt/aws-lambda-ric-3.3.0 —
 * unless it is there already (trainer/dev/rehearsal/runtime-client.ts), and prints the package's directory.
 * .ci/run runs it after `npm ci`, so the rehearsal tests do not pay the build (about 1.5 min) in their timeouts.
 */
import { ensureRuntimeClient } from '../trainer/dev/rehearsal/runtime-client.ts';

process.stdout.write(`${await ensureRuntimeClient()}\n`);
