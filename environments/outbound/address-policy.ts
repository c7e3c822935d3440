/**
 * Which addresses a call to a user-named endpoint (an environment server, a rollout agent, an MCP server, a
 * web app) may reach. Public unicast addresses always; the operator may add `private` (RFC 1918, unique
 * local, carrier-grade NAT) and `loopback` networks. Link-local addresses — the instance metadata service
 * (169.254.169.254, fd00:ec2::254 is unique-local and falls under `private`) among them — and unspecified,
 * broadcast, multicast and reserved ranges are never reachable: no deployment has a reason to send an
 * agent's traffic there. Plain http is allowed only to a loopback address (a server on the same machine);
 * everything else must be https.
 *
 * The check runs on the address actually connected to (outbound-fetch.ts resolves the name and connects to
 * the address it checked), so a name that resolves to a public address once and a private one later
 * (DNS rebinding) gains nothing.
 */
import ipaddr from 'ipaddr.js';
import { z } from 'zod';

export const EndpointNetwork = z.enum(['private', 'loopback']);
export type EndpointNetwork = z.infer<typeof EndpointNetwork>;

export const OutboundPolicy = z
  .object({
    /** Non-public networks the operator allows besides the public internet. */
    allow: z.array(EndpointNetwork).default([]),
  })
  .strict();
export type OutboundPolicy = z.infer<typeof OutboundPolicy>;

/** A deployed stack's default: the public internet only. */
export const PUBLIC_ONLY: OutboundPolicy = { allow: [] };
/** An embedded run on one machine: servers on this machine too (the user's own, started beside the run). */
export const EMBEDDED_OUTBOUND: OutboundPolicy = { allow: ['loopback'] };

/**
 * The operator's setting: `ESOPT_ENDPOINT_NETWORKS`, a comma-separated list of `private` and `loopback`
 * (empty or unset: public only). A value outside that list is an error, not a silent public-only.
 */
export function outboundPolicyFromEnv(env: Record<string, string | undefined>, fallback: OutboundPolicy = PUBLIC_ONLY): OutboundPolicy {
  const raw = env.ESOPT_ENDPOINT_NETWORKS;
  if (raw === undefined) return fallback;
  const names = raw.split(',').map((s) => s.trim()).filter((s) => s !== '');
  const parsed = z.array(EndpointNetwork).safeParse(names);
  if (!parsed.success) throw new Error(`ESOPT_ENDPOINT_NETWORKS must list only "private" and "loopback", comma-separated (got ${JSON.stringify(raw)})`);
  return { allow: [...new Set(parsed.data)] };
}

/** Why a call was refused or failed; the message is fixed per reason and never carries a server's body. */
export type OutboundFailure = 'scheme' | 'address' | 'redirect' | 'too-large' | 'timeout' | 'network';

export class OutboundError extends Error {
  constructor(
    readonly reason: OutboundFailure,
    message: string,
  ) {
    super(message);
    this.name = 'OutboundError';
  }
}

type Range = 'allowed' | EndpointNetwork | 'never';

function rangeOf(address: string): Range {
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  const range = parsed.range();
  if (range === 'unicast') return 'allowed';
  if (range === 'loopback') return 'loopback';
  if (range === 'private' || range === 'uniqueLocal' || range === 'carrierGradeNat') return 'private';
  return 'never';
}

/** Throws OutboundError('address') unless `address` (an IP literal) may be reached under `policy`. */
export function checkAddress(address: string, policy: OutboundPolicy): void {
  if (!ipaddr.isValid(address)) throw new OutboundError('address', `not an IP address: ${JSON.stringify(address)}`);
  const range = rangeOf(address);
  if (range === 'allowed') return;
  if (range !== 'never' && policy.allow.includes(range)) return;
  const what = range === 'never' ? 'a link-local, reserved or special address, never reachable' : `a ${range} address, not allowed here (the operator's ESOPT_ENDPOINT_NETWORKS)`;
  throw new OutboundError('address', `${address} is ${what}`);
}

/** Whether `address` is a loopback address (http is allowed only to those). */
export function isLoopback(address: string): boolean {
  return ipaddr.isValid(address) && rangeOf(address) === 'loopback';
}

/**
 * The checks that need no DNS: https (or http to a loopback literal or `localhost`), no credentials in the
 * URL, and an IP-literal host in an allowed range. Names are checked again on the resolved address.
 */
export function checkUrl(url: URL, policy: OutboundPolicy): void {
  if (url.username || url.password) throw new OutboundError('scheme', 'credentials in the URL are not accepted (give a key instead)');
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const literal = ipaddr.isValid(host);
  if (url.protocol === 'http:' || url.protocol === 'ws:') {
    const local = literal ? isLoopback(host) : host === 'localhost';
    if (!local || !policy.allow.includes('loopback')) throw new OutboundError('scheme', `${url.protocol}// is only for a server on this machine; use https (or wss)`);
  } else if (url.protocol !== 'https:' && url.protocol !== 'wss:') {
    throw new OutboundError('scheme', `${url.protocol} is not an endpoint scheme; use https`);
  }
  if (literal) checkAddress(host, policy);
}
