/**
 * The dashboard: a static page, its script and style, and uPlot served from node_modules. All public —
 * the page holds no data; it fetches everything from the API with the user's token.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { Env, Hono } from 'hono';

const require = createRequire(import.meta.url);
const here = (file: string) => fileURLToPath(new URL(`./dashboard/${file}`, import.meta.url));

const ASSETS: Record<string, { path: () => string; type: string }> = {
  'dashboard.js': { path: () => here('dashboard.js'), type: 'text/javascript; charset=utf-8' },
  'dashboard.css': { path: () => here('dashboard.css'), type: 'text/css; charset=utf-8' },
  'uplot.js': { path: () => require.resolve('uplot/dist/uPlot.iife.min.js'), type: 'text/javascript; charset=utf-8' },
  'uplot.css': { path: () => require.resolve('uplot/dist/uPlot.min.css'), type: 'text/css; charset=utf-8' },
};

export const DASHBOARD_PATHS = ['/', ...Object.keys(ASSETS).map((name) => `/assets/${name}`)];

export function registerDashboard<E extends Env>(app: Hono<E>): void {
  const cache = new Map<string, string>();
  const load = async (path: string) => {
    let text = cache.get(path);
    if (text === undefined) cache.set(path, (text = await readFile(path, 'utf8')));
    return text;
  };
  app.get('/', async (c) => c.html(await load(here('index.html'))));
  app.get('/assets/:name', async (c) => {
    const asset = ASSETS[c.req.param('name')];
    if (!asset) return c.notFound();
    return c.body(await load(asset.path()), 200, { 'Content-Type': asset.type, 'Cache-Control': 'public, max-age=300' });
  });
}
