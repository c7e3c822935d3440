/**
 * The endpoints an environment's options name: every string field called `url`, at any depth (an OpenEnv
 * server's, a rollout agent's, each MCP server's). The API checks them at the door and binds an endpoint key
 * to their one origin; the Episode function sends the key only there.
 */

/** Each `url` string in `value` with its path (`environment.options.mcp.servers.1.url`); bounded depth, options are small. */
export function endpointUrls(value: unknown, path: string, depth = 0): { path: string; url: string }[] {
  if (depth > 8 || value === null || typeof value !== 'object') return [];
  const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v] as const) : Object.entries(value);
  return entries.flatMap(([k, v]) => (k === 'url' && typeof v === 'string' ? [{ path: `${path}.${k}`, url: v }] : endpointUrls(v, `${path}.${k}`, depth + 1)));
}
