/**
 * How esopt judges an episode on a user's own web app: all declarative, no code from the request. At the end
 * (the agent says `done`, or its actions run out) esopt reads what the task names into one JSON document —
 *
 *   { "url": "<the page's URL>", "title": "<its title>",
 *     "elements": { "<name>": { "count": n, "text": "…", "value": "…"|null, "checked": true|false|null } },
 *     "fetched": { "status": 200, "json": <the app's state endpoint's JSON, or null> } }
 *
 * — and the task's `predicate` (shared/json-predicate.ts) decides success over it: a URL match, an element's
 * text or value, the app's own state, or any combination of those. `elements` are CSS selectors, each read from
 * the first element it selects (count: how many); `fetch` is a path on the app's origin, read with a GET from
 * esopt (not from the page), with the evaluation's key when one was given.
 */
import { z } from 'zod';
import { evaluatePredicate, JsonPredicate } from '../../shared/json-predicate.ts';

export const AppOptions = z
  .object({
    /** The app's base URL: https (http only to this machine, in embedded runs). The endpoint key, if any, goes to this origin alone. */
    url: z.url(),
    /** Further origins its pages may load from (a CDN's `https://cdn.example`): checked like `url`, sent no key. */
    alsoAllow: z.array(z.url()).max(16).default([]),
    /** The most actions an episode may take. */
    horizon: z.number().int().min(1).max(200).default(15),
    /** The largest response the browser may receive from the app (each request), and the state endpoint's. */
    maxResponseBytes: z.number().int().min(1024).max(64 * 1024 * 1024).default(5 * 1024 * 1024),
  })
  .strict();
export type AppOptions = z.infer<typeof AppOptions>;

const ElementName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,31}$/, 'a name of letters, digits and _ (the key under "elements")');

export const AppCheck = z
  .object({
    /** Elements to read, by name: CSS selectors. */
    elements: z.record(ElementName, z.string().min(1).max(500)).refine((e) => Object.keys(e).length <= 16, 'at most 16 elements').optional(),
    /** A path on the app's origin whose JSON answer is `fetched.json` (`/api/state`). */
    fetch: z.string().regex(/^\/[^\s]*$/, 'a path on the app, starting with /').max(2048).optional(),
    predicate: JsonPredicate,
  })
  .strict();
export type AppCheck = z.infer<typeof AppCheck>;

/** The origins an app's pages may reach: its own, then the others it allows. */
export function appOrigins(options: AppOptions): string[] {
  return [...new Set([new URL(options.url).origin, ...options.alsoAllow.map((u) => new URL(u).origin)])];
}

/** The URL a task starts at: a path on the app, or an absolute URL on an allowed origin (else an error saying so). */
export function startUrl(start: string, options: AppOptions): string {
  const url = start.startsWith('/') ? new URL(start, options.url) : new URL(start);
  if (!appOrigins(options).includes(url.origin)) throw new Error(`the task's start ${url.origin} is not the app's origin nor one it allows (options.app.url, alsoAllow)`);
  return url.href;
}

const ElementReading = z.object({ count: z.number().int().min(0), text: z.string().nullable(), value: z.string().nullable(), checked: z.boolean().nullable() });
const PageReading = z.object({ url: z.string(), title: z.string(), elements: z.record(z.string(), ElementReading) });
export type PageReading = z.infer<typeof PageReading>;

/** The expression esopt evaluates in the page: selectors travel as JSON data, bad ones come back named. */
export function readPageExpression(elements: Record<string, string>): string {
  return `(function (sel) {
  var out = {}, bad = [];
  for (var k in sel) {
    var list;
    try { list = document.querySelectorAll(sel[k]); } catch (e) { bad.push(k); continue; }
    var el = list[0];
    out[k] = {
      count: list.length,
      text: el ? String(el.innerText || el.textContent || '').trim().slice(0, 2000) : null,
      value: el && typeof el.value === 'string' ? el.value.slice(0, 2000) : null,
      checked: el && typeof el.checked === 'boolean' ? el.checked : null
    };
  }
  return { url: location.href, title: String(document.title || '').slice(0, 500), elements: out, bad: bad };
})(${JSON.stringify(elements)})`;
}

export function parsePageReading(raw: unknown): PageReading {
  const bad = (raw as { bad?: unknown } | null)?.bad;
  if (Array.isArray(bad) && bad.length > 0) throw new Error(`the check's selector for ${bad.map(String).join(', ')} is not valid CSS`);
  const parsed = PageReading.safeParse(raw);
  if (!parsed.success) throw new Error('the page could not be read for the check');
  return parsed.data;
}

export interface Judgement {
  success: boolean;
  /** The document the predicate saw (bounded: texts cut at 2,000 characters; the state endpoint's JSON as it came). */
  document: Record<string, unknown>;
}

/** Reads the state endpoint: its status, and its JSON (null when it is not JSON or not a 2xx). */
export async function fetchState(fetcher: typeof fetch, url: string, key: string | undefined): Promise<{ status: number; json: unknown }> {
  const res = await fetcher(url, { method: 'GET', headers: { accept: 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) } });
  const text = await res.text();
  if (!res.ok) return { status: res.status, json: null };
  try {
    return { status: res.status, json: JSON.parse(text) as unknown };
  } catch {
    return { status: res.status, json: null };
  }
}

export function judge(check: AppCheck, page: PageReading, fetched: { status: number; json: unknown } | undefined): Judgement {
  const document = { url: page.url, title: page.title, elements: page.elements, ...(fetched ? { fetched } : {}) };
  return { success: evaluatePredicate(check.predicate, document), document };
}
