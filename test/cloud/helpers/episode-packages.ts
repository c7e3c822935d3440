/** What the Episode function installs next to its bundle: sst.config.ts's `nodejs.install` (asserted equal in sst-config.test.ts), measured against Lambda's limits in episode-lambda-chromium.test.ts. */
export const EPISODE_INSTALLED_PACKAGES = ['isolated-vm', '@sparticuz/chromium', 'playwright-core'];
