/** The complete HTML document of a task page: its markup, the bridge, then its judging script. */
import { PAGE_BRIDGE } from './page-bridge.ts';
import { esc, type TaskPage } from './task-type.ts';

/** JSON that is safe inside a <script> element. */
function scriptJson(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

export function pageDocument(page: TaskPage): string {
  return `<!doctype html>
<html><head><meta charset="utf-8"><title>${esc(page.title)}</title></head>
<body>${page.body}
<script>${PAGE_BRIDGE}</script>
<script>(function () { var DATA = ${scriptJson(page.data)}; var finish = window.__esopt.finish;
${page.script}
})();</script>
</body></html>`;
}
