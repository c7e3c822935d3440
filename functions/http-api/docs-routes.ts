/**
 * The API docs page (Swagger UI) served entirely by the API: its page, and swagger-ui-dist's script and
 * style from node_modules, so /docs works offline and on a deployment with no route to a CDN. The page
 * references only this server's paths, and the online validator badge is off (it would call out).
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { Env, Hono } from 'hono';

const require = createRequire(import.meta.url);

const ASSETS: Record<string, { file: string; type: string }> = {
  'swagger-ui.css': { file: 'swagger-ui-dist/swagger-ui.css', type: 'text/css; charset=utf-8' },
  'swagger-ui-bundle.js': { file: 'swagger-ui-dist/swagger-ui-bundle.js', type: 'text/javascript; charset=utf-8' },
};

export const DOCS_PATHS = ['/docs', ...Object.keys(ASSETS).map((name) => `/docs/assets/${name}`)];

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>esopt API</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script>
window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui', validatorUrl: null, persistAuthorization: false });
</script>
</body>
</html>
`;

export function registerDocs<E extends Env>(app: Hono<E>): void {
  const cache = new Map<string, string>();
  app.get('/docs', (c) => c.html(PAGE));
  app.get('/docs/assets/:name', async (c) => {
    const asset = ASSETS[c.req.param('name')];
    if (!asset) return c.notFound();
    let text = cache.get(asset.file);
    if (text === undefined) cache.set(asset.file, (text = await readFile(require.resolve(asset.file), 'utf8')));
    return c.body(text, 200, { 'Content-Type': asset.type, 'Cache-Control': 'public, max-age=86400' });
  });
}
