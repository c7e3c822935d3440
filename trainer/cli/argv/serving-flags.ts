/**
 * `--public-url URL [--host H] [--port P]`: where a command's inference server listens and the address
 * workers reach it at (https: TLS, its certificate pinned), as train, trainer-box, replica-box and replica
 * take them. The public URL is given with or without the `/v1` the stack's outputs end in.
 */
import { z } from 'zod';
import { flag, type FlagSpec, type Parsed } from './args.ts';
import { UsageError } from './usage-error.ts';

export const servingFlags = { 'public-url': { type: 'string' }, host: { type: 'string' }, port: { type: 'string' } } as const satisfies FlagSpec;

/** 0 asks for any free port. */
export const Port = z.coerce.number().int().min(0).max(65_535);

/** An http(s) URL, normalized to end in `/v1`. */
export const PublicUrl = z.url({ protocol: /^https?$/ }).transform((u) => `${u.replace(/\/+$/, '').replace(/\/v1$/, '')}/v1`);

export interface Serving {
  host: string | undefined;
  port: number | undefined;
  publicUrl: string | undefined;
}

/**
 * The serving flags with this command's defaults; `publicUrl`: `required`, `optional`, or a sentence saying
 * why the command refuses it.
 */
export function servingFromFlags(p: Parsed, o: { host?: string; port?: number; publicUrl: 'required' | 'optional' | { refused: string } }): Serving {
  const given = p.values['public-url'] !== undefined;
  if (typeof o.publicUrl === 'object' && given) throw new UsageError(`--public-url ${o.publicUrl.refused}`);
  const publicUrl = o.publicUrl === 'required' || given ? flag(p.values, 'public-url', PublicUrl) : undefined;
  return {
    host: p.values.host === undefined ? o.host : flag(p.values, 'host', z.string().min(1)),
    port: p.values.port === undefined ? o.port : flag(p.values, 'port', Port),
    publicUrl,
  };
}
