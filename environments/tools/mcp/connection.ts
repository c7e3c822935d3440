/**
 * One MCP server for one episode, through @modelcontextprotocol/sdk's Client: streamable HTTP (`url`) or a
 * program over stdio (`command`, only where the context allows commands).
 *
 * Every request is bounded: HTTP goes through outboundFetch (only addresses the outbound policy allows, checked
 * after DNS; no redirect followed; each body capped at maxResponseBytes, each call timed), a stdio message past
 * maxResponseBytes ends the connection, and each request waits at most `min(callTimeoutMs, what is left of the
 * episode)`. Failures are McpFailure with a fixed sentence naming the server and at most a status or a JSON-RPC
 * code: a server's own text never reaches an error, a record or a log (tool results are another matter: they
 * are what the model reads). The endpoint key goes as `Authorization: Bearer` to the HTTP servers only.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import type { JsonSchemaValidator, jsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';
import { checkUrl, OutboundError } from '../../outbound/address-policy.ts';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../../outbound/json-depth.ts';
import { outboundFetch } from '../../outbound/outbound-fetch.ts';
import type { EnvironmentContext } from '../../environment.ts';
import type { McpServerOptions } from './options.ts';

/** The most tools one server may list (over all pages), and pages of tools/list read. */
const MAX_TOOLS = 256;
const MAX_PAGES = 16;
/** How long close() waits for an HTTP session's DELETE, or a stdio program to exit by itself, before moving on. */
const CLOSE_GRACE_MS = 1_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms).unref());

function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Ends a stdio program for sure. The SDK's close ends stdin, then signals two seconds apart, in the background
 * when a failed connect already began it; an episode's end must not leave its program running that long.
 */
async function killProgram(pid: number): Promise<void> {
  if (!running(pid)) return;
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    return;
  }
  // Until Node has reaped it (a zombie still answers signal 0), within a bound.
  for (let waited = 0; waited < CLOSE_GRACE_MS && running(pid); waited += 20) await sleep(20);
}

/**
 * The SDK checks a tool's structured result against the outputSchema its server lists, compiling that schema
 * with Ajv — whose own documentation says never to compile an untrusted schema: a `pattern` such as `^(a+)+$`
 * then backtracks for ever on a result of a few dozen characters, blocking the whole process (every episode,
 * the trainer), and compiling a huge or deep schema is slow or overflows the stack. esopt needs no such check
 * (a structured result is shown as JSON, or read for a verifier's numeric `reward`), so none is made.
 */
const NO_OUTPUT_VALIDATION: jsonSchemaValidator = {
  getValidator<T>(): JsonSchemaValidator<T> {
    return (input) => ({ valid: true, data: input as T, errorMessage: undefined });
  },
};

/** Why an MCP server failed its episode; the message is fixed per reason. */
export class McpFailure extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'McpFailure';
  }
}

export interface McpLimits {
  callTimeoutMs: number;
  maxResponseBytes: number;
  /** Epoch milliseconds after which no request starts or continues. */
  episodeEnd: number;
}

export interface ListedTool {
  server: string;
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

/** What a tools/call answered, as far as esopt reads it. */
export interface ToolResult {
  isError: boolean;
  /** The text contents joined, other contents named (`[image]`), or the structured content as JSON. */
  text: string;
  structured?: Record<string, unknown>;
}

export interface McpConnection {
  readonly server: string;
  listTools(): Promise<ListedTool[]>;
  callTool(name: string, args: Record<string, unknown>): Promise<ToolResult>;
  close(): Promise<void>;
}

type Content = { type: string; text?: unknown };

export function resultText(content: readonly Content[] | undefined, structured: unknown): string {
  const parts = (content ?? []).map((c) => (c.type === 'text' && typeof c.text === 'string' ? c.text : `[${c.type.slice(0, 32)}]`));
  if (parts.length === 0 && structured !== undefined) return JSON.stringify(structured);
  return parts.join('\n');
}

/** A fixed sentence for whatever a request threw (the SDK's messages can carry a server's text: never used). */
function failureOf(err: unknown, server: string, what: string, ms: number): McpFailure {
  if (err instanceof McpFailure) return err;
  const prefix = `MCP server "${server}"`;
  if (err instanceof OutboundError) return new McpFailure(`${prefix}, ${what}: ${err.message}`);
  if (err instanceof StreamableHTTPError) return new McpFailure(`${prefix} answered HTTP ${err.code ?? '?'} to ${what}`);
  if (err instanceof McpError) {
    if (err.code === ErrorCode.RequestTimeout) return new McpFailure(`${prefix} did not answer ${what} within ${ms} ms`);
    if (err.code === ErrorCode.ConnectionClosed) return new McpFailure(`${prefix} closed the connection during ${what}`);
    return new McpFailure(`${prefix} answered ${what} with JSON-RPC error ${err.code}`);
  }
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return new McpFailure(`${prefix}: ${what} failed${typeof code === 'string' && /^[A-Z_]{1,32}$/.test(code) ? ` (${code})` : ''}`);
}

function transportFor(server: McpServerOptions, context: EnvironmentContext, limits: McpLimits, timeLeft: () => number): Transport {
  if (server.command) {
    if (!context.allowCommands) {
      throw new McpFailure(`MCP server "${server.name}" names a command: programs start only in an embedded run from a run config file (esopt train --config FILE); give an https url instead`);
    }
    const [command, ...args] = server.command;
    return new StdioClientTransport({
      command: command!,
      args,
      // The SDK's safe defaults (HOME, PATH, …), never the trainer's own variables and secrets.
      env: { ...getDefaultEnvironment(), ...server.env },
      ...(server.cwd ? { cwd: server.cwd } : {}),
      stderr: 'ignore',
      maxBufferSize: limits.maxResponseBytes,
    });
  }
  const url = new URL(server.url!);
  try {
    checkUrl(url, context.outbound);
  } catch (err) {
    throw failureOf(err, server.name, 'its url', 0);
  }
  // Each request gets a fetch timed to what is left of the call and the episode.
  const fetcher: typeof fetch = (input, init) => outboundFetch(context.outbound, { timeoutMs: timeLeft(), maxResponseBytes: limits.maxResponseBytes })(input, init);
  return new StreamableHTTPClientTransport(url, {
    fetch: fetcher,
    ...(context.endpointKey ? { requestInit: { headers: { authorization: `Bearer ${context.endpointKey}` } } } : {}),
    // A dropped stream fails its request; it is not resumed (the call's time limit decides instead).
    reconnectionOptions: { maxRetries: 0, initialReconnectionDelay: 1_000, maxReconnectionDelay: 1_000, reconnectionDelayGrowFactor: 1 },
  });
}

/** Connects (MCP's initialize) within the call limit; a server that cannot be reached or started fails here. */
export async function connectMcp(server: McpServerOptions, context: EnvironmentContext, limits: McpLimits): Promise<McpConnection> {
  const timeLeft = () => {
    const left = Math.min(limits.callTimeoutMs, limits.episodeEnd - Date.now());
    if (left <= 0) throw new McpFailure('the episode ran past its time limit (mcp.episodeTimeoutMs)');
    return left;
  };
  const transport = transportFor(server, context, limits, timeLeft);
  // A response over the size bound surfaces as a transport error (a stream cut off, a stdio buffer refused),
  // not as the request's answer: it fails every request in flight at once instead of leaving them to time out.
  const fatal = new AbortController();
  transport.onerror = (err: Error) => {
    if ((err instanceof OutboundError && err.reason === 'too-large') || /the response passed \d+ bytes|ReadBuffer exceeded/.test(String(err?.message))) {
      fatal.abort(new McpFailure(`MCP server "${server.name}" sent a message over ${limits.maxResponseBytes} bytes (mcp.maxResponseBytes)`));
    }
  };
  // The stdio program's pid, kept from its start: the SDK forgets it once its own close begins.
  let pid: number | null = null;
  if (transport instanceof StdioClientTransport) {
    const start = transport.start.bind(transport);
    transport.start = async () => {
      await start();
      pid = transport.pid;
    };
  }
  const client = new Client({ name: 'esopt', version: '1' }, { capabilities: {}, jsonSchemaValidator: NO_OUTPUT_VALIDATION });
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    fatal.abort(new McpFailure(`MCP server "${server.name}": the connection is closed`));
    if (transport instanceof StreamableHTTPClientTransport && transport.sessionId) {
      // Ends the server's session (DELETE), politely and briefly: a server that stalls here is left.
      await Promise.race([transport.terminateSession().catch(() => undefined), new Promise((r) => setTimeout(r, CLOSE_GRACE_MS).unref())]);
    }
    // A stdio program gets stdin closed and a moment to exit by itself, then SIGKILL.
    await Promise.race([client.close().catch(() => undefined), sleep(pid === null ? 10 * CLOSE_GRACE_MS : CLOSE_GRACE_MS / 4)]);
    if (pid !== null) await killProgram(pid);
  };
  const request = async <T>(what: string, run: (options: { timeout: number; signal: AbortSignal }) => Promise<T>): Promise<T> => {
    const ms = timeLeft();
    // A signal of the request's own: the SDK adds an abort listener to the signal it is given and never removes
    // it, so the connection's one signal would gather a listener (and the request it holds) for every call.
    const own = new AbortController();
    const forward = () => own.abort(fatal.signal.reason);
    fatal.signal.addEventListener('abort', forward, { once: true });
    try {
      if (fatal.signal.aborted) throw fatal.signal.reason;
      return await run({ timeout: ms, signal: own.signal });
    } catch (err) {
      throw failureOf(fatal.signal.aborted && !closed ? fatal.signal.reason : err, server.name, what, ms);
    } finally {
      fatal.signal.removeEventListener('abort', forward);
    }
  };
  try {
    await request('initialize', (options) => client.connect(transport, options));
  } catch (err) {
    await close();
    throw err;
  }
  return {
    server: server.name,
    async listTools() {
      const tools: ListedTool[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < MAX_PAGES; page++) {
        const answer = await request('tools/list', (options) => client.listTools(cursor === undefined ? {} : { cursor }, options));
        for (const t of answer.tools) {
          if (nestsDeeperThan(t.inputSchema)) throw new McpFailure(`MCP server "${server.name}" lists a tool whose input schema nests deeper than ${MAX_JSON_DEPTH} levels`);
          tools.push({ server: server.name, name: t.name, description: (t.description ?? '').slice(0, 2000), inputSchema: t.inputSchema as Record<string, unknown> });
          if (tools.length > MAX_TOOLS) throw new McpFailure(`MCP server "${server.name}" lists more than ${MAX_TOOLS} tools`);
        }
        cursor = answer.nextCursor;
        if (cursor === undefined) return tools;
      }
      throw new McpFailure(`MCP server "${server.name}" pages tools/list past ${MAX_PAGES} pages`);
    },
    async callTool(name, args) {
      const answer = await request('tools/call', (options) => client.callTool({ name, arguments: args }, undefined, options));
      const structured = answer.structuredContent as Record<string, unknown> | undefined;
      if (nestsDeeperThan(structured)) throw new McpFailure(`MCP server "${server.name}" answered tools/call with structured content nested deeper than ${MAX_JSON_DEPTH} levels`);
      return { isError: answer.isError === true, text: resultText(answer.content as Content[] | undefined, structured), ...(structured ? { structured } : {}) };
    },
    close,
  };
}
