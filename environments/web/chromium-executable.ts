/**
 * Which Chromium the web environment launches. The rule, first match wins:
 *
 *   1. the web option `executablePath`, else 2. $ESOPT_CHROMIUM: a path, or `lambda` for the Lambda build;
 *   3. on AWS Lambda ($AWS_LAMBDA_FUNCTION_NAME set): the Lambda build (`@sparticuz/chromium`), which the
 *      Episode function installs, since Lambda's image has no browser;
 *   4. /usr/bin/chromium when it is executable;
 *   5. the Lambda build when its package is installed (it also runs on an ordinary x64 Linux);
 *   6. otherwise an error saying how to get one.
 *
 * The Lambda build ships brotli-packed; `chromiumExecutable` inflates it to the temp dir once per
 * process (what a Lambda's /tmp keeps between warm invocations).
 */
import { accessSync, constants } from 'node:fs';
import { createRequire } from 'node:module';
import { DEFAULT_CHROMIUM } from './task.ts';

/** The value of `executablePath` / $ESOPT_CHROMIUM that names the Lambda build. */
export const LAMBDA_CHROMIUM = 'lambda';
export const LAMBDA_CHROMIUM_PACKAGE = '@sparticuz/chromium';

export type ChromiumChoice =
  | { kind: 'path'; path: string; why: 'option' | 'ESOPT_CHROMIUM' | 'system' }
  | { kind: 'lambda'; why: 'option' | 'ESOPT_CHROMIUM' | 'on Lambda' | 'package installed' };

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Whether the Lambda build's package can be loaded from here. */
export function lambdaChromiumInstalled(): boolean {
  try {
    createRequire(import.meta.url).resolve(LAMBDA_CHROMIUM_PACKAGE);
    return true;
  } catch {
    return false;
  }
}

const HOW_TO_FIX = `install it (Debian: apt-get install chromium, or npm's ${LAMBDA_CHROMIUM_PACKAGE}) or point ESOPT_CHROMIUM or the web option "executablePath" at a Chromium executable (or "${LAMBDA_CHROMIUM}" for the Lambda build)`;

function named(value: string, why: 'option' | 'ESOPT_CHROMIUM'): ChromiumChoice {
  if (value === LAMBDA_CHROMIUM) {
    if (!lambdaChromiumInstalled()) throw new Error(`the Lambda Chromium (${LAMBDA_CHROMIUM_PACKAGE}) is not installed: ${HOW_TO_FIX}`);
    return { kind: 'lambda', why };
  }
  if (!executable(value)) throw new Error(`Chromium not found at ${value}: ${HOW_TO_FIX}`);
  return { kind: 'path', path: value, why };
}

/** Applies the rule above (synchronously: a missing browser is reported before an episode starts). */
export function chooseChromium(executablePath: string | undefined, env: Record<string, string | undefined> = process.env): ChromiumChoice {
  if (executablePath) return named(executablePath, 'option');
  if (env.ESOPT_CHROMIUM) return named(env.ESOPT_CHROMIUM, 'ESOPT_CHROMIUM');
  if (env.AWS_LAMBDA_FUNCTION_NAME) {
    if (!lambdaChromiumInstalled()) throw new Error(`running on Lambda without the Lambda Chromium (${LAMBDA_CHROMIUM_PACKAGE}): the function must install it`);
    return { kind: 'lambda', why: 'on Lambda' };
  }
  if (executable(DEFAULT_CHROMIUM)) return { kind: 'path', path: DEFAULT_CHROMIUM, why: 'system' };
  if (lambdaChromiumInstalled()) return { kind: 'lambda', why: 'package installed' };
  throw new Error(`Chromium not found at ${DEFAULT_CHROMIUM}: ${HOW_TO_FIX}`);
}

/** A key that names the browser a choice launches (one shared browser per key). */
export function chromiumKey(choice: ChromiumChoice): string {
  return choice.kind === 'lambda' ? LAMBDA_CHROMIUM : choice.path;
}

/** The executable's path; for the Lambda build, inflated on first use. */
export async function chromiumExecutable(choice: ChromiumChoice): Promise<string> {
  if (choice.kind === 'path') return choice.path;
  const { default: lambdaChromium } = await import('@sparticuz/chromium');
  return lambdaChromium.executablePath();
}

/**
 * Flags the Lambda build needs besides ours (which already turn the sandbox off): no zygote, and the
 * headless shell it is. Not the package's --single-process: there, closing one episode's context takes
 * the whole browser down with the other episodes in it; nor its --disable-web-security, which would
 * loosen the page isolation.
 */
export const LAMBDA_CHROMIUM_ARGS = ['--no-zygote', '--headless=shell'];
