/**
 * Stack-wide cost caps for tests that build the Api app as deployed (createCloudApp): the app queues no run
 * or evaluation without a spending limit (functions/http-api/cost-caps.ts), and with these every request
 * that names none gets one, far above what a test's tiny runs spend.
 */
export const STACK_CAPS = { ESOPT_MAX_RUN_COST_USD: 100, ESOPT_MAX_EVALUATION_COST_USD: 100 } as const;
