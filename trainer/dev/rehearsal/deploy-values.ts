/**
 * The values a deploy fills in, on one machine: sst.config.ts evaluated offline leaves every deploy-time
 * output (a bucket's name, a secret, an address) as a `${Type.Name.prop}` placeholder; the rehearsal
 * gives each one its local value. A placeholder without one is refused by name, so a new reference in
 * the stack cannot pass the rehearsal unresolved.
 */
/** A recorded output: `${sst.…}` or `${aws.…}` (bash's own `${…}` in a user data is left alone). */
const PLACEHOLDER = /\$\{((?:sst|aws)\.[A-Za-z0-9_.]+)\}/g;

export type DeployValues = Record<string, string>;

/** `text` with every placeholder replaced; throws naming those `values` lacks (and what the text was for). */
export function fillPlaceholders(text: string, values: DeployValues, what: string): string {
  const missing = new Set<string>();
  const filled = text.replace(PLACEHOLDER, (whole, ref: string) => {
    const value = values[ref];
    if (value === undefined) missing.add(ref);
    return value ?? whole;
  });
  if (missing.size) throw new Error(`${what}: no rehearsal value for ${[...missing].map((m) => `\${${m}}`).join(', ')}`);
  return filled;
}

/** A recorded environment block with its placeholders filled. */
export function fillEnvironment(environment: Record<string, unknown> | undefined, values: DeployValues, what: string): Record<string, string> {
  return Object.fromEntries(Object.entries(environment ?? {}).map(([k, v]) => [k, fillPlaceholders(String(v), values, `${what} ${k}`)]));
}
